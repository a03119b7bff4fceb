// Drives Pinfold's review console (/console) in headless Chromium the way a
// reviewer would, against a running Pinfold and a real OpenID provider
// (examples/oidc-provider), and runs axe-core on every console page:
//
//   1. rita signs in through the provider (its login and consent pages);
//      the queue lists the pending 1.1.0; its page puts the escalation
//      (read_file may now delete) above the tools; she approves it with
//      the keyboard (Tab to the button, Enter) and sees the attestation.
//   2. The audit log (filtered) links the approval to its version; the
//      ledger renders; rita signs out.
//   3. bob, the publisher of 1.2.0, signs in: no approve button, the page
//      says why; forged POSTs (his own CSRF token, none) are refused and
//      1.2.0 stays pending.
//
// Every console answer carries the CSP; the page never loads anything from
// another origin than Pinfold (the provider's pages aside, during sign-in);
// axe-core finds no serious or critical violation on any console page.
// Screenshots in target/console-check/. Exits non-zero on the first failure.
//
// Environment (set by scripts/console-check.sh):
//   PINFOLD_URL        base URL of the running Pinfold
//   PROVIDER_URL       the OpenID provider's issuer
//   PINFOLD_ADMIN      a dev admin token (reads statuses through the API)
//   CHROMIUM           browser binary (default /usr/bin/chromium)

import { chromium } from 'playwright-core';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const OUT = path.join(here, '..', '..', 'target', 'console-check');
const BASE = (process.env.PINFOLD_URL || '').replace(/\/+$/, '');
const PROVIDER = (process.env.PROVIDER_URL || '').replace(/\/+$/, '');
const ADMIN = process.env.PINFOLD_ADMIN || '';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const TENANT = 'dev';
const SERVER = 'io.github.acme/files';
const CSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

class Failure extends Error {}
const fail = (msg) => { throw new Failure(msg); };
const t0 = Date.now();
const log = (msg) => console.log(`[console-check ${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
const versionPath = (v) => `/console/t/${TENANT}/servers/${encodeURIComponent(SERVER)}/versions/${v}`;

let shot = 0;
const audited = [];

async function status(version) {
  const r = await fetch(`${BASE}/v1/tenants/${TENANT}/servers/${encodeURIComponent(SERVER)}/versions/${version}`, {
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  return (await r.json()).status;
}

/// axe-core on the current page: no serious or critical violation.
async function audit(page, name) {
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () =>
    (await globalThis.axe.run(document, { resultTypes: ['violations'] })).violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`));
  if (violations.length) fail(`axe on ${name}:\n  ${violations.join('\n  ')}`);
  audited.push(name);
  await page.screenshot({ path: path.join(OUT, `${String(++shot).padStart(2, '0')}-${name}.png`), fullPage: true });
  log(`axe: ${name} has no serious or critical violation`);
}

/// Watches a context's pages: every console answer carries the CSP, every
/// request goes to Pinfold or (during sign-in) the provider, no CSP report.
function watch(context) {
  const problems = [];
  context.on('page', (p) => attach(p, problems));
  return problems;
}
function attach(page, problems) {
  page.on('response', (r) => {
    const u = r.url();
    const csp = r.headers()['content-security-policy'];
    // The sign-in page's form leads on to the provider: its form-action names it.
    const toProvider = csp === CSP.replace("form-action 'self'", `form-action 'self' ${PROVIDER}`);
    if (u.startsWith(`${BASE}/console`) && csp !== CSP && !toProvider) {
      problems.push(`no or another CSP on ${u}: ${r.headers()['content-security-policy']}`);
    }
  });
  page.on('request', (r) => {
    // What a console page loads (the provider's own pages load what they
    // like; a navigation to the provider is the sign-in itself).
    const u = r.url();
    if (!page.url().startsWith(`${BASE}/`) || r.isNavigationRequest()) return;
    if (!u.startsWith(`${BASE}/`)) problems.push(`a console page loaded ${u}`);
  });
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/.test(m.text()) && page.url().startsWith(BASE)) {
      problems.push(`CSP report on ${page.url()}: ${m.text()}`);
    }
  });
  page.on('pageerror', (e) => problems.push(`page error on ${page.url()}: ${e}`));
}

/// Signs in as `user` through the provider, from the console's sign-in page.
async function signIn(page, user) {
  await page.goto(`${BASE}/console/t/${TENANT}/sign-in`);
  await audit(page, `sign-in-${user}`);
  await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: /Sign in with/ }).click()]);
  // The provider's own pages: login, then consent.
  for (let step = 0; step < 6 && page.url().startsWith(`${PROVIDER}/`); step++) {
    await page.waitForLoadState();
    if (await page.locator('input[name=login]').count()) {
      await page.fill('input[name=login]', user);
      await page.fill('input[name=password]', 'any');
    }
    await Promise.all([page.waitForNavigation(), page.locator('button[type=submit], input[type=submit]').first().click()]);
  }
  if (!page.url().startsWith(`${BASE}/console/t/${TENANT}/queue`)) {
    const said = await page.locator('main').innerText().catch(() => '');
    fail(`${user}: sign-in ended at ${page.url()}: ${said}`);
  }
  const who = await page.locator('.who').innerText();
  if (!who.includes(user)) fail(`${user}: the console names ${who}`);
  log(`${user} signed in through the provider (login and consent)`);
}

async function main() {
  if (!BASE || !PROVIDER || !ADMIN) fail('PINFOLD_URL, PROVIDER_URL and PINFOLD_ADMIN must be set');
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    // --- rita reviews -------------------------------------------------------
    const rita = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    rita.setDefaultTimeout(20_000);
    const ritaProblems = watch(rita);
    let page = await rita.newPage();
    await signIn(page, 'rita');
    await audit(page, 'queue');
    const row = page.locator('table.queue tbody tr', { hasText: '1.1.0' });
    if (!(await row.count())) fail('the queue does not list 1.1.0');
    await row.getByRole('link', { name: '1.1.0' }).click();
    await page.waitForURL(`**${versionPath('1.1.0')}`);
    const first = await page.locator('ol.escalations li').first().innerText();
    if (!/read_file/.test(first) || !/less safely/.test(first)) fail(`first escalation: ${first}`);
    const above = await page.evaluate(() =>
      !!(document.querySelector('ol.escalations').compareDocumentPosition(document.getElementById('tools'))
        & Node.DOCUMENT_POSITION_FOLLOWING));
    if (!above) fail('the escalations are not above the tools');
    log('1.1.0: the escalation of read_file is at the top');
    await audit(page, 'version-pending');
    // Approve with the keyboard: the note, Tab, Enter.
    await page.focus('#note');
    await page.keyboard.type('checked the delete path');
    await page.keyboard.press('Tab');
    const focused = await page.evaluate(() => document.activeElement?.getAttribute('value'));
    if (focused !== 'approve') fail(`Tab from the note reaches ${focused}, not the approve button`);
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    if ((await status('1.1.0')) !== 'approved') fail('1.1.0 is not approved after the approve button');
    const jws = await page.locator('pre.jws').innerText();
    if (jws.split('.').length !== 3) fail(`no attestation on the page: ${jws}`);
    log('approved by keyboard; the attestation is on the page');
    await audit(page, 'version-approved');
    await page.goto(`${BASE}/console/t/${TENANT}/audit?kind=version.approved&actor=rita`);
    await audit(page, 'audit');
    await page.getByRole('link', { name: `${SERVER} 1.1.0` }).click();
    await page.waitForURL(`**${versionPath('1.1.0')}`);
    await page.goto(`${BASE}/console/t/${TENANT}/ledger`);
    await audit(page, 'ledger');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`**/console/t/${TENANT}/sign-in?signed_out=1`);
    await page.goto(`${BASE}/console/t/${TENANT}/queue`);
    if (!page.url().includes('/sign-in')) fail('after sign-out the queue still answers');
    log('rita signed out; the queue sends her to sign in again');
    if (ritaProblems.length) fail(ritaProblems.join('\n'));

    // --- bob published 1.2.0 ------------------------------------------------
    const bob = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    bob.setDefaultTimeout(20_000);
    const bobProblems = watch(bob);
    page = await bob.newPage();
    await signIn(page, 'bob');
    await page.goto(`${BASE}${versionPath('1.2.0')}`);
    if (await page.locator('button[value=approve]').count()) fail('bob sees an approve button on his own version');
    const why = await page.locator('#why-no-approve').innerText();
    if (!/you published this version/.test(why)) fail(`the page does not say why: ${why}`);
    await audit(page, 'version-own');
    const csrf = await page.locator('input[name=csrf]').first().getAttribute('value');
    for (const form of [{ csrf, decision: 'approve' }, { decision: 'approve' }]) {
      const r = await bob.request.post(`${BASE}${versionPath('1.2.0')}/review`, { form, maxRedirects: 0 });
      if (r.status() !== 403) fail(`a forged approve answered ${r.status()}`);
    }
    if ((await status('1.2.0')) !== 'pending') fail('1.2.0 changed after the forged POSTs');
    log('bob: no approve button, the page says why, forged POSTs refused, 1.2.0 still pending');
    if (bobProblems.length) fail(bobProblems.join('\n'));
    log(`passed: axe clean on ${audited.length} pages (${[...new Set(audited)].join(', ')}); screenshots in ${OUT}`);
  } finally {
    await browser.close();
  }
}

const timer = setTimeout(() => { console.error('console-check: timed out'); process.exit(3); }, 180_000);
main().then(() => { clearTimeout(timer); }).catch((e) => {
  clearTimeout(timer);
  console.error(`console-check: FAILED: ${e instanceof Failure ? e.message : e.stack || e}`);
  process.exit(1);
});

// Drives Pinfold's review console (/console) in headless Chromium the way a
// reviewer would, against a running Pinfold and a real OpenID provider
// (examples/oidc-provider), and runs axe-core on every console page. Every
// action is taken with the keyboard alone (Tab to it from the top of the
// page, Enter; Space or the arrow keys for a checkbox or radio button), and
// its effect is checked:
//
//   1. rita signs in through the provider (its login and consent pages);
//      the queue's "Next page" link leads to the pending versions past the
//      first page; the queue lists the pending 1.1.0; its page puts the
//      escalation (read_file may now delete) above the tools; she approves
//      it (Tab from the note to the button, Enter) and sees the
//      attestation.
//   2. She rejects 1.3.0 with a note, deprecates 1.0.0 and revokes 1.4.0
//      with a reason and the confirmation that names the server and the
//      version (without it the form is not sent and nothing changes).
//   3. The audit log: its five filters filled and sent, the filtered event
//      linking to its version; its "Next page" link; the ledger; rita
//      signs out with the header's button.
//   4. bob, the publisher of 1.2.0, signs in: no approve button, the page
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

/// The element that has the keyboard focus, described (null: none).
async function focused(page) {
  return page.evaluate(() => {
    const e = document.activeElement;
    if (!e || e === document.body) return null;
    return {
      tag: e.tagName.toLowerCase(),
      type: e.getAttribute('type') || '',
      name: e.getAttribute('name') || '',
      value: e.getAttribute('value') || '',
      id: e.id,
      text: (e.innerText || '').trim(),
      href: e.getAttribute('href') || '',
      checked: !!e.checked,
      label: e.labels && e.labels.length ? e.labels[0].innerText.trim() : '',
    };
  });
}

/// Presses Tab until the focused element is what `want` says (from where
/// the focus is: after a navigation, the top of the page), at most `max`
/// times; fails when Tab never reaches it.
async function tabTo(page, what, want, max = 300) {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    const f = await focused(page);
    if (f && want(f)) return f;
  }
  fail(`Tab never reaches ${what} on ${page.url()}`);
}

/// Presses Enter on the focused element and waits for the page it leads to.
async function enter(page) {
  await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
}

/// Tabs to a link by its text and follows it with Enter.
async function followLink(page, text, hrefEnd) {
  await tabTo(page, `the link ${text}`, (f) => f.tag === 'a' && f.text === text && (!hrefEnd || f.href.endsWith(hrefEnd)));
  await enter(page);
}

/// The version page's lifecycle form, by keyboard: the status's radio
/// button (Tab into the group, arrow keys to the value), the reason, the
/// confirmation checkbox (Space), the button (Enter). The checkbox and the
/// button must name the server and the version. With `unconfirmedFirst`,
/// Enter on the button before the box is ticked must send nothing.
async function changeStatus(page, version, want, reason, unconfirmedFirst) {
  await tabTo(page, 'the status radio buttons', (f) => f.type === 'radio' && f.name === 'status');
  for (let i = 0; i < 3 && (await focused(page)).value !== want; i++) await page.keyboard.press('ArrowDown');
  await page.keyboard.press('Space');
  const radio = await focused(page);
  if (radio.value !== want || !radio.checked) fail(`the ${want} radio button is not chosen: ${JSON.stringify(radio)}`);
  await page.keyboard.press('Tab');
  if ((await focused(page)).id !== 'reason') fail('Tab from the status does not reach the reason');
  await page.keyboard.type(reason);
  await page.keyboard.press('Tab');
  const box = await focused(page);
  if (box.type !== 'checkbox' || !box.label.includes(SERVER) || !box.label.includes(version)) {
    fail(`the confirmation does not name ${SERVER} ${version}: ${JSON.stringify(box)}`);
  }
  if (unconfirmedFirst) {
    await page.keyboard.press('Tab');
    const before = page.url();
    await page.keyboard.press('Enter');
    await page.waitForTimeout(500);
    if (page.url() !== before) fail(`the status form was sent without its confirmation: ${page.url()}`);
    if ((await status(version)) === want) fail(`${version} became ${want} without the confirmation`);
    // The browser's validation takes the focus to the unticked box (else
    // Shift+Tab goes back to it).
    if ((await focused(page)).type !== 'checkbox') await page.keyboard.press('Shift+Tab');
    if ((await focused(page)).type !== 'checkbox') fail('the focus does not come back to the confirmation');
  }
  await page.keyboard.press('Space');
  if (!(await focused(page)).checked) fail('Space does not tick the confirmation');
  await page.keyboard.press('Tab');
  const button = await focused(page);
  if (button.tag !== 'button' || !button.text.includes(`${SERVER} ${version}`)) fail(`Tab reaches ${JSON.stringify(button)}, not the status button`);
  await enter(page);
  if ((await status(version)) !== want) fail(`${version} is not ${want} after the status form`);
}

/// The ids of the audit events a page lists.
async function auditIds(page) {
  return page.locator('table.audit tbody tr td:first-child').allInnerTexts();
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
    // --- rita reviews ---------------------------------------------------------
    const rita = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    rita.setDefaultTimeout(20_000);
    const ritaProblems = watch(rita);
    let page = await rita.newPage();
    await signIn(page, 'rita');
    await audit(page, 'queue');
    // The queue pages: its "Next page" link, by keyboard.
    const firstPage = await page.locator('table.queue tbody tr').count();
    if (firstPage !== 25) fail(`the queue's first page lists ${firstPage} versions, not 25`);
    await followLink(page, 'Next page');
    if (!/\/queue\?after=/.test(page.url())) fail(`Next page led to ${page.url()}`);
    const secondPage = await page.locator('table.queue tbody tr').allInnerTexts();
    if (!secondPage.length || secondPage.some((r) => r.includes('1.1.0'))) fail(`the queue's second page: ${secondPage.join(' | ')}`);
    await audit(page, 'queue-page-2');
    log(`queue: Next page by keyboard lists ${secondPage.length} more pending versions`);
    await followLink(page, 'Review queue');
    // The pending 1.1.0, by keyboard from the queue.
    const row = page.locator('table.queue tbody tr', { hasText: '1.1.0' });
    if (!(await row.count())) fail('the queue does not list 1.1.0');
    await followLink(page, '1.1.0', '/versions/1.1.0');
    if (!page.url().endsWith(versionPath('1.1.0'))) fail(`the 1.1.0 link led to ${page.url()}`);
    const first = await page.locator('ol.escalations li').first().innerText();
    if (!/read_file/.test(first) || !/less safely/.test(first)) fail(`first escalation: ${first}`);
    const above = await page.evaluate(() =>
      !!(document.querySelector('ol.escalations').compareDocumentPosition(document.getElementById('tools'))
        & Node.DOCUMENT_POSITION_FOLLOWING));
    if (!above) fail('the escalations are not above the tools');
    log('1.1.0: the escalation of read_file is at the top');
    await audit(page, 'version-pending');
    // Approve with the keyboard: Tab to the note, type, Tab, Enter.
    await tabTo(page, 'the note', (f) => f.id === 'note');
    await page.keyboard.type('checked the delete path');
    await page.keyboard.press('Tab');
    const focusedValue = (await focused(page))?.value;
    if (focusedValue !== 'approve') fail(`Tab from the note reaches ${focusedValue}, not the approve button`);
    await enter(page);
    if ((await status('1.1.0')) !== 'approved') fail('1.1.0 is not approved after the approve button');
    const jws = await page.locator('pre.jws').innerText();
    if (jws.split('.').length !== 3) fail(`no attestation on the page: ${jws}`);
    log('approved by keyboard; the attestation is on the page');
    await audit(page, 'version-approved');

    // Reject 1.3.0 with a note: Tab from the note passes approve to reject.
    await page.goto(`${BASE}${versionPath('1.3.0')}`);
    await tabTo(page, 'the note', (f) => f.id === 'note');
    await page.keyboard.type('no stat tool without a reason');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    const reject = await focused(page);
    if (reject?.value !== 'reject') fail(`Tab past approve reaches ${JSON.stringify(reject)}, not the reject button`);
    await enter(page);
    if ((await status('1.3.0')) !== 'rejected') fail('1.3.0 is not rejected after the reject button');
    if (!(await page.locator('main').innerText()).includes('no stat tool without a reason')) fail('the rejection note is not on the page');
    log('rejected 1.3.0 by keyboard, with its note');
    await audit(page, 'version-rejected');

    // Deprecate 1.0.0, then revoke 1.4.0: each confirmation names the
    // server and version; unconfirmed, the revocation is not sent.
    await page.goto(`${BASE}${versionPath('1.0.0')}`);
    await changeStatus(page, '1.0.0', 'deprecated', 'superseded by 1.1.0', false);
    log('deprecated 1.0.0 by keyboard');
    await audit(page, 'version-deprecated');
    await page.goto(`${BASE}${versionPath('1.4.0')}`);
    await changeStatus(page, '1.4.0', 'revoked', 'published by mistake', true);
    log('revoked 1.4.0 by keyboard (refused until confirmed)');
    await audit(page, 'version-revoked');

    // The audit log: the navigation link, the five filters, the Filter
    // button, the filtered event's link to its version.
    await followLink(page, 'Audit log');
    await audit(page, 'audit');
    for (const [id, value] of [['kind', 'version.rejected'], ['actor', 'rita'], ['server', SERVER],
      ['since', '2000-01-01'], ['until', '2999-01-01']]) {
      await tabTo(page, `the ${id} filter`, (f) => f.id === id);
      await page.keyboard.type(value);
    }
    await tabTo(page, 'the Filter button', (f) => f.tag === 'button' && f.text === 'Filter');
    await enter(page);
    const url = new URL(page.url());
    if (url.searchParams.get('kind') !== 'version.rejected' || url.searchParams.get('until') !== '2999-01-01') fail(`the filters sent ${url.search}`);
    const kinds = await page.locator('table.audit tbody tr td:nth-child(4)').allInnerTexts();
    if (kinds.length !== 1 || kinds[0] !== 'version.rejected') fail(`filtered audit log lists ${kinds.join(', ')}`);
    await audit(page, 'audit-filtered');
    await followLink(page, `${SERVER} 1.3.0`);
    if (!page.url().endsWith(versionPath('1.3.0'))) fail(`the audit event led to ${page.url()}`);
    log('audit: filters sent by keyboard; the rejection links to 1.3.0');
    // Its pages: "Next page" lists older events only.
    await followLink(page, 'Audit log');
    const auditFirst = await auditIds(page);
    await followLink(page, 'Next page');
    if (!/\/audit\?after=/.test(page.url())) fail(`Next page led to ${page.url()}`);
    const auditSecond = await auditIds(page);
    if (auditFirst.length !== 25 || !auditSecond.length || auditSecond.some((id) => auditFirst.includes(id))) {
      fail(`audit pages: [${auditFirst}] then [${auditSecond}]`);
    }
    await audit(page, 'audit-page-2');
    log(`audit: Next page by keyboard lists ${auditSecond.length} more events`);
    await followLink(page, 'Ledger');
    await audit(page, 'ledger');
    // Sign out with the header's button.
    await tabTo(page, 'the Sign out button', (f) => f.tag === 'button' && f.text === 'Sign out');
    await enter(page);
    if (!page.url().endsWith(`/console/t/${TENANT}/sign-in?signed_out=1`)) fail(`sign-out led to ${page.url()}`);
    await page.goto(`${BASE}/console/t/${TENANT}/queue`);
    if (!page.url().includes('/sign-in')) fail('after sign-out the queue still answers');
    log('rita signed out by keyboard; the queue sends her to sign in again');
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

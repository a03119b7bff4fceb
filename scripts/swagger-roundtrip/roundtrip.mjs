// Drives Pinfold's Swagger UI (/docs) in headless Chromium through a full
// publish -> review -> fetch round trip, the way a person would: Authorize,
// expand the operation, "Try it out", fill the parameters and the body,
// "Execute", and read the response the UI renders.
//
//   1. Authorize as the publisher; publish_version     -> UI shows 201
//   2. Re-authorize as a reviewer (a different sub,
//      separation of duties); review_version approve  -> UI shows 200, "approved"
//   3. get_version with version `latest`               -> UI shows 200 and the digest
//
// Every request the page makes must go to the Pinfold origin (the UI is served
// offline). Screenshots of each step land in target/swagger-roundtrip/.
// Exits non-zero with a message on the first failure.
//
// Environment:
//   PINFOLD_URL              base URL of a running Pinfold (required)
//   PINFOLD_PUBLISHER_TOKEN  JWT with the publisher role in PINFOLD_TENANT (required)
//   PINFOLD_REVIEWER_TOKEN   JWT with the reviewer role, another sub (required)
//   PINFOLD_TENANT           tenant id (default: dev)
//   CHROMIUM                browser binary (default: /usr/bin/chromium)
//   SWAGGER_RT_OUT          screenshot directory (default: <repo>/target/swagger-roundtrip)
//
// Normally run through scripts/swagger-roundtrip.sh, which starts Pinfold.

import { chromium } from 'playwright-core';
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '..', '..');

const BASE = (process.env.PINFOLD_URL || '').replace(/\/+$/, '');
const PUBLISHER = process.env.PINFOLD_PUBLISHER_TOKEN || '';
const REVIEWER = process.env.PINFOLD_REVIEWER_TOKEN || '';
const TENANT = process.env.PINFOLD_TENANT || 'dev';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const OUT = process.env.SWAGGER_RT_OUT || path.join(repoRoot, 'target', 'swagger-roundtrip');

const SERVER = 'io.github.acme/files';
const VERSION = '1.0.0';
const CARD = {
  name: SERVER,
  version: VERSION,
  description: 'Files',
  signature: {
    tools: [{ name: 'read_file', inputSchema: { type: 'object' }, annotations: { readOnlyHint: true } }],
    prompts: [],
    resources: [],
    resourceTemplates: [],
  },
};
const REVIEW = { decision: 'approve', note: 'ok' };

const STEP_TIMEOUT_MS = 20_000;   // any single wait (selector, response)
const OVERALL_TIMEOUT_MS = 180_000; // hard stop so CI never hangs

class Failure extends Error {}
const fail = (msg) => { throw new Failure(msg); };
const t0 = Date.now();
const elapsed = () => ((Date.now() - t0) / 1000).toFixed(1).padStart(5);
const log = (msg) => console.log(`[swagger-roundtrip ${elapsed()}s] ${msg}`);

function jwtSub(token) {
  try {
    return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8')).sub;
  } catch {
    return undefined;
  }
}

function preflight() {
  if (!BASE) fail('PINFOLD_URL is not set (e.g. http://127.0.0.1:8080)');
  if (!PUBLISHER) fail('PINFOLD_PUBLISHER_TOKEN is not set');
  if (!REVIEWER) fail('PINFOLD_REVIEWER_TOKEN is not set');
  const ps = jwtSub(PUBLISHER);
  const rs = jwtSub(REVIEWER);
  if (!ps || !rs) fail('PINFOLD_PUBLISHER_TOKEN / PINFOLD_REVIEWER_TOKEN are not JWTs with a sub claim');
  if (ps === rs) {
    fail(`publisher and reviewer tokens share sub "${ps}"; the review would be refused (separation_of_duties)`);
  }
}

async function main() {
  preflight();
  const origin = new URL(BASE).origin;
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });

  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    context.setDefaultTimeout(STEP_TIMEOUT_MS);
    const page = await context.newPage();

    // Every request the page makes, for the same-origin check at the end.
    const requests = [];
    page.on('request', (r) => requests.push(`${r.method()} ${r.url()}`));
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    page.on('requestfailed', (r) => log(`request failed: ${r.method()} ${r.url()} (${r.failure()?.errorText})`));

    let shot = 0;
    // target: the page (viewport), a locator (that element), or an operation
    // block { op } (its summary down to the end of the live response, so the
    // static response documentation below is left out).
    const screenshot = async (name, target = page) => {
      const file = path.join(OUT, `${String(++shot).padStart(2, '0')}-${name}.png`);
      if (target === page) {
        await page.screenshot({ path: file });
      } else if (target.op) {
        const clip = await target.op.evaluate((el) => {
          const top = el.getBoundingClientRect();
          const buttons = el.querySelectorAll('.execute-wrapper, .btn-group'); // last: Execute [Clear]
          const end = el.querySelector('.live-responses-table') || buttons[buttons.length - 1] || el;
          const bottom = end.getBoundingClientRect().bottom;
          return { x: top.left, y: top.top + window.scrollY, width: top.width, height: bottom - top.top + 8 };
        });
        await page.screenshot({ path: file, fullPage: true, clip });
      } else {
        await target.screenshot({ path: file });
      }
      log(`screenshot ${path.relative(repoRoot, file) || file}`);
    };

    // ---- load the UI -------------------------------------------------------
    log(`opening ${BASE}/docs/`);
    const docs = await page.goto(`${BASE}/docs/`, { waitUntil: 'networkidle' });
    if (!docs || !docs.ok()) fail(`GET ${BASE}/docs/ answered ${docs ? docs.status() : 'nothing'}`);
    await page.locator('#operations-registry-publish_version').waitFor();
    await screenshot('docs-loaded');

    // ---- helpers that act like a user -------------------------------------
    const authorize = async (token, label) => {
      await page.locator('.auth-wrapper button.authorize').click();
      const modal = page.locator('.dialog-ux .modal-ux');
      await modal.waitFor();
      const scheme = modal.locator('.auth-container').filter({
        has: page.locator('h4', { hasText: /^\s*bearer\b/ }),
      });
      if ((await scheme.count()) !== 1) fail('the Authorize dialog has no "bearer" scheme');
      // Log out of a previous authorization first (re-authorize).
      const logout = scheme.locator('button.auth', { hasText: 'Logout' });
      if (await logout.count()) {
        await logout.click();
        await scheme.locator('input').first().waitFor();
      }
      await scheme.locator('input').first().fill(token);
      await scheme.locator('button.authorize', { hasText: 'Authorize' }).click();
      // Authorized state: the scheme shows "Logout" and the token is masked.
      await scheme.locator('button.auth', { hasText: 'Logout' }).waitFor();
      await screenshot(`authorized-${label}`, modal);
      await modal.locator('button.btn-done').click();
      await modal.waitFor({ state: 'detached' });
      await page.locator('.auth-wrapper button.authorize.locked').waitFor();
      log(`authorized as ${label} (sub ${jwtSub(token)})`);
    };

    const operation = async (opId) => {
      const op = page.locator(`#operations-registry-${opId}`);
      if ((await op.count()) !== 1) fail(`operation #operations-registry-${opId} is not rendered`);
      await op.scrollIntoViewIfNeeded();
      if (!(await op.evaluate((el) => el.classList.contains('is-open')))) {
        await op.locator('.opblock-summary-control').click();
      }
      await op.locator('.opblock-body').waitFor();
      await op.locator('button.try-out__btn', { hasText: 'Try it out' }).click();
      await op.locator('button.execute').waitFor();
      return op;
    };

    const fillParams = async (op, params) => {
      for (const [name, value] of Object.entries(params)) {
        const input = op.locator(`tr[data-param-name="${name}"][data-param-in="path"] input`);
        if ((await input.count()) !== 1) fail(`no input for path parameter "${name}"`);
        await input.fill(value);
      }
    };

    const fillBody = async (op, body) => {
      const textarea = op.locator('textarea.body-param__text');
      await textarea.waitFor();
      await textarea.fill(JSON.stringify(body, null, 2));
    };

    // Click Execute, wait for the API response on the wire and for the UI to
    // render it; return { status shown, body shown, request }.
    const execute = async (op, method, apiPath, token) => {
      const url = `${origin}${apiPath}`;
      const [response] = await Promise.all([
        page.waitForResponse((r) => r.request().method() === method && r.url() === url),
        op.locator('button.execute').click(),
      ]).catch((e) => fail(`no ${method} ${url} was sent after Execute (${e.message.split('\n')[0]})`));
      const auth = response.request().headers()['authorization'];
      if (auth !== `Bearer ${token}`) {
        fail(`${method} ${apiPath} carried the wrong Authorization header (${auth ? auth.slice(0, 20) + '...' : 'none'})`);
      }
      const row = op.locator('.responses-wrapper .live-responses-table tr.response').first();
      const statusCell = row.locator('td.response-col_status');
      await statusCell.waitFor();
      const shownStatus = (await statusCell.innerText()).trim();
      const bodyBlock = row.locator('.response-col_description pre').first();
      await bodyBlock.waitFor();
      const shownBody = await bodyBlock.innerText();
      await op.locator('.responses-wrapper').scrollIntoViewIfNeeded();
      return { wireStatus: response.status(), shownStatus, shownBody };
    };

    const parseShown = (shownBody, what) => {
      try {
        return JSON.parse(shownBody);
      } catch {
        fail(`${what}: the response body shown is not JSON:\n${shownBody.slice(0, 500)}`);
      }
    };

    const expectStatus = (res, want, what) => {
      if (res.shownStatus !== String(want) || res.wireStatus !== want) {
        fail(`${what}: expected ${want}, the UI shows ${res.shownStatus} (wire ${res.wireStatus}):\n${res.shownBody.slice(0, 800)}`);
      }
    };

    const versionPath = (version) =>
      `/v1/tenants/${encodeURIComponent(TENANT)}/servers/${encodeURIComponent(SERVER)}/versions/${encodeURIComponent(version)}`;

    // ---- 1. publish as the publisher ---------------------------------------
    await authorize(PUBLISHER, 'publisher');
    const publish = await operation('publish_version');
    await fillParams(publish, { tenant: TENANT, server: SERVER, version: VERSION });
    await fillBody(publish, CARD);
    await screenshot('publish-filled', { op: publish });
    const pub = await execute(publish, 'PUT', versionPath(VERSION), PUBLISHER);
    await screenshot('publish-response', { op: publish });
    expectStatus(pub, 201, 'publish_version');
    const published = parseShown(pub.shownBody, 'publish_version');
    if (!/^sha256:[0-9a-f]{64}$/.test(published.digest || '')) {
      fail(`publish_version: the response shows no sha256 digest: ${pub.shownBody.slice(0, 500)}`);
    }
    if (published.status !== 'pending') {
      fail(`publish_version: expected status "pending" (review required), got "${published.status}"`);
    }
    log(`published ${SERVER}@${VERSION}: 201, ${published.digest}, pending`);

    // ---- 2. approve as a different reviewer --------------------------------
    await authorize(REVIEWER, 'reviewer');
    const review = await operation('review_version');
    await fillParams(review, { tenant: TENANT, server: SERVER, version: VERSION });
    await fillBody(review, REVIEW);
    await screenshot('review-filled', { op: review });
    const rev = await execute(review, 'POST', `${versionPath(VERSION)}/review`, REVIEWER);
    await screenshot('review-response', { op: review });
    expectStatus(rev, 200, 'review_version');
    if (!rev.shownBody.includes('"approved"')) {
      fail(`review_version: the response does not show "approved":\n${rev.shownBody.slice(0, 800)}`);
    }
    const reviewed = parseShown(rev.shownBody, 'review_version');
    if (reviewed.status !== 'approved') fail(`review_version: status is "${reviewed.status}", not "approved"`);
    log(`reviewed: 200, approved by ${reviewed.approved_by}`);

    // ---- 3. fetch latest ---------------------------------------------------
    const get = await operation('get_version');
    await fillParams(get, { tenant: TENANT, server: SERVER, version: 'latest' });
    await screenshot('get-filled', { op: get });
    const got = await execute(get, 'GET', versionPath('latest'), REVIEWER);
    await screenshot('get-response', { op: get });
    expectStatus(got, 200, 'get_version latest');
    if (!got.shownBody.includes(published.digest)) {
      fail(`get_version latest: the response does not show digest ${published.digest}:\n${got.shownBody.slice(0, 800)}`);
    }
    const fetched = parseShown(got.shownBody, 'get_version latest');
    if (fetched.version !== VERSION || fetched.status !== 'approved') {
      fail(`get_version latest: expected ${VERSION} approved, got ${fetched.version} ${fetched.status}`);
    }
    log(`fetched latest: 200, ${fetched.version}, ${fetched.digest}`);

    await page.waitForLoadState('networkidle');
    await screenshot('final', page);

    // ---- offline / same-origin ---------------------------------------------
    const foreign = requests.filter((r) => {
      const url = r.slice(r.indexOf(' ') + 1);
      if (url.startsWith('data:') || url.startsWith('blob:')) return false;
      try {
        return new URL(url).origin !== origin;
      } catch {
        return true;
      }
    });
    if (foreign.length) {
      fail(`the page made ${foreign.length} request(s) outside ${origin}:\n  ${foreign.join('\n  ')}`);
    }
    if (pageErrors.length) fail(`uncaught errors in the page:\n  ${pageErrors.join('\n  ')}`);
    log(`all ${requests.length} page requests went to ${origin}`);
  } finally {
    await browser.close();
  }
}

const guard = setTimeout(() => {
  console.error(`[swagger-roundtrip] FAILED: gave up after ${OVERALL_TIMEOUT_MS / 1000}s`);
  process.exit(2);
}, OVERALL_TIMEOUT_MS);
guard.unref();

try {
  await main();
  log('PASS: publish (201) -> review (200, approved) -> get latest (200, digest) via Swagger UI');
  process.exit(0);
} catch (e) {
  const msg = e instanceof Failure ? e.message : (e && e.stack) || String(e);
  console.error(`[swagger-roundtrip] FAILED: ${msg}`);
  process.exit(1);
}

// Drives the page's sign-in, a conversation's thread and the verified examples' buttons
// in Debian's headless Chromium (playwright-core), as a person would. Run by
// tests/browser.rs against `askdb serve` with one user and the scripted provider;
// failures exit non-zero with the reason on stderr.
//
// Environment:
//   ASKDB_URL        the page
//   ASKDB_TOKEN      the user's token (`askdb users add ana`)
//   ASKDB_USER       that user's name
//   ASKDB_ARTIFACTS  folder for the screenshots (created)
//   CHROMIUM         the browser binary (default /usr/bin/chromium)

import { chromium } from "playwright-core";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const url = process.env.ASKDB_URL;
const token = process.env.ASKDB_TOKEN;
const user = process.env.ASKDB_USER || "ana";
const artifacts = process.env.ASKDB_ARTIFACTS || "browser-artifacts";
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
if (!url || !token) {
  console.error("ASKDB_URL and ASKDB_TOKEN are required");
  process.exit(2);
}

const FIRST = "How many bills were voided in 2025?";
const FOLLOW = "And in 2026?";
const UNDERSTOOD = "the number of bills voided in 2026";
const ALONE = "How many customers are there?";
const CORRECTED = "SELECT count(*) AS customers FROM customers WHERE cust_id IS NOT NULL";

const passed = [];
function check(condition, what, detail) {
  if (!condition) throw new Error(what + (detail === undefined ? "" : ": " + JSON.stringify(detail)));
  passed.push(what);
}

mkdirSync(artifacts, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), "askdb-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath,
  headless: true,
  viewport: { width: 1280, height: 900 },
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});

const problems = [];
let exitCode = 0;
try {
  const page = context.pages()[0] || (await context.newPage());
  page.on("console", (message) => {
    // Failed fetches the page shows by design: 401 before signing in and after signing
    // out, 404 for the ended conversation, /api/eval and /api/health as in ask.mjs.
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) problems.push("console: " + message.text());
  });
  page.on("pageerror", (error) => problems.push("page error: " + error.message));

  // Asks on the page and waits until the answer to `question` is on show.
  async function ask(question) {
    await page.fill("#question", question);
    await page.press("#question", "Enter");
    await page.waitForFunction((text) => document.getElementById("result-question").textContent === text
      && document.getElementById("progress").hidden && !document.getElementById("result").hidden, question, { timeout: 30000 });
  }
  // What the server holds, read through the page's own session.
  const examples = () => page.evaluate(async () => {
    const response = await fetch("/api/examples");
    return response.ok ? response.json() : { status: response.status };
  });

  // ---- Sign in ----
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("#sign-in:not([hidden])", { timeout: 15000 });
  check(await page.isHidden("#layout"), "signed out, the page shows only the sign-in form");
  await page.fill("#sign-in-token", "askdb_" + "0".repeat(64));
  await page.click("#sign-in-button");
  await page.waitForSelector("#sign-in-error:not([hidden])", { timeout: 10000 });
  const refused = await page.textContent("#sign-in-error");
  check(refused.includes("not accepted"), "a wrong token is refused", refused);
  check((await page.inputValue("#sign-in-token")) === "", "the typed token is not kept in the form");
  await page.fill("#sign-in-token", token);
  await page.press("#sign-in-token", "Enter");
  await page.waitForSelector("#account:not([hidden])", { timeout: 10000 });
  check((await page.textContent("#account-user")).includes(user), "the page says who is signed in");
  await page.waitForSelector("#schema-list details", { timeout: 15000 });
  const cookies = await context.cookies();
  const session = cookies.find((cookie) => cookie.name === "askdb_session");
  check(session && session.httpOnly && session.sameSite === "Strict", "the session is an HttpOnly, SameSite=Strict cookie", session);
  check(!session.value.includes(token.slice(6)), "the cookie is not the token");
  const visible = await page.evaluate(() => document.cookie + JSON.stringify(window.localStorage) + JSON.stringify(window.sessionStorage));
  check(!visible.includes("askdb_session") && !visible.includes(token.slice(6)), "no script can read the cookie or the token", visible);

  // ---- A conversation: a question, a follow-up, a new conversation ----
  await ask(FIRST);
  check((await page.textContent("#decision")).trim() === "Answer", "the first question is answered");
  check((await page.textContent("#turn-label")).trim() === "Question 1", "it is the conversation's first question");
  check(await page.isVisible("#new-conversation"), "a New conversation action is offered");
  await ask(FOLLOW);
  check((await page.textContent("#turn-label")).trim() === "Question 2", "the follow-up continues the conversation");
  const understood = await page.textContent("#understood");
  check(understood === "Understood as: " + UNDERSTOOD, "the follow-up says how it was understood", understood);
  check((await page.textContent("#grid")).includes("voided"), "the follow-up's rows are shown");
  check((await page.locator("#thread > li").count()) === 1, "the first turn is in the thread");
  check(!(await page.locator("#thread details").first().evaluate((node) => node.open)), "an earlier turn is folded");
  await page.click("#thread details summary");
  const earlier = await page.textContent("#thread details");
  check(earlier.includes(FIRST) && earlier.includes("'2025'"), "an opened earlier turn shows its question and SQL", earlier);
  await page.screenshot({ path: join(artifacts, "thread.png"), fullPage: true });
  passed.push("screenshot " + join(artifacts, "thread.png"));

  // ---- Correct: the person's click saves the follow-up as it was understood ----
  check((await examples()).length === 0, "no example exists before a click");
  await page.click("#mark-correct");
  await page.waitForFunction(() => /Saved as a verified example/.test(document.getElementById("verify-status").textContent), null, { timeout: 10000 });
  let saved = await examples();
  check(saved.length === 1 && saved[0].question === UNDERSTOOD && saved[0].verified_by === user
    && saved[0].sql.includes("'2026'"), "Correct saved the answer, confirmed by the signed-in user", saved);

  await page.click("#new-conversation");
  check(await page.isHidden("#thread") && await page.isHidden("#result"), "New conversation clears the thread");
  await ask(ALONE);
  check((await page.textContent("#turn-label")).trim() === "Question 1", "the next question starts a new conversation");
  check((await page.locator("#thread > li").count()) === 0, "nothing of the old conversation is shown");

  // ---- Wrong: the console, a corrected query, Save ----
  const marked = page.waitForResponse((response) => response.url().endsWith("/api/answers/wrong"), { timeout: 10000 });
  await page.click("#mark-wrong");
  const mark = await marked;
  check(mark.request().method() === "POST" && mark.status() === 201, "Wrong records the answer as wrong", mark.status());
  const markBody = JSON.parse(mark.request().postData() || "{}");
  check(markBody.question === ALONE && markBody.marked_by === user && Array.isArray(markBody.examples),
    "the mark names the question, the signed-in user and the examples the answer used", markBody);
  await page.waitForFunction(() => /Recorded as wrong by/.test(document.getElementById("verify-status").textContent), null, { timeout: 10000 });
  check((await examples()).length === 1, "recording an answer as wrong saved nothing");
  check((await page.inputValue("#console-sql")).toLowerCase().includes("from customers"), "Wrong opens the SQL in the console");
  check(await page.isVisible("#correction"), "the console says which question is being corrected");
  check(await page.isHidden("#save-correction"), "nothing can be saved before the corrected query runs");
  await page.fill("#console-sql", "SELECT cust_name, phone FROM customers");
  await page.click("#console-run");
  await page.waitForSelector("#console-result .error-box", { timeout: 10000 });
  const restricted = await page.textContent("#console-result .error-box");
  check(/restricted|phone/.test(restricted), "a restricted column is refused with its reason", restricted);
  check(await page.isHidden("#save-correction"), "a refused query cannot be saved");
  await page.fill("#console-sql", CORRECTED);
  await page.click("#console-run");
  await page.waitForSelector("#console-result table", { timeout: 10000 });
  await page.waitForSelector("#save-correction:not([hidden])", { timeout: 5000 });
  check((await examples()).length === 1, "running the corrected query saved nothing");
  await page.click("#save-correction");
  await page.waitForFunction(() => /Saved as a verified example/.test(document.getElementById("correction-status").textContent), null, { timeout: 10000 });
  saved = await examples();
  const correction = saved.find((example) => example.question === ALONE);
  check(correction && correction.sql.includes("cust_id IS NOT NULL") && correction.verified_by === user,
    "Save stored the corrected query as the answer to the question", saved);

  // ---- An ended conversation: its sentence, then a new one ----
  await page.route("**/api/ask/stream", (route) => {
    const body = JSON.parse(route.request().postData() || "{}");
    body.conversation_id = "f".repeat(32);
    route.continue({ postData: JSON.stringify(body) });
  }, { times: 1 });
  await page.fill("#question", "And the year before?");
  await page.press("#question", "Enter");
  await page.waitForSelector("#thread-notice:not([hidden])", { timeout: 10000 });
  const ended = (await page.textContent("#answer")) + " " + (await page.textContent("#thread-notice"));
  check(/expired|no conversation/.test(ended) && ended.includes("new conversation"), "an ended conversation shows its sentence and starts anew", ended);
  check(await page.isHidden("#thread-head"), "the ended conversation is forgotten");
  await ask(ALONE);
  check((await page.textContent("#turn-label")).trim() === "Question 1", "the question after it starts a new conversation");

  // ---- Sign out ----
  await page.click("#sign-out");
  await page.waitForSelector("#sign-in:not([hidden])", { timeout: 10000 });
  const after = await page.evaluate(async () => (await fetch("/api/schema")).status);
  check(after === 401, "after signing out the API refuses the browser", after);
  check(!(await context.cookies()).some((cookie) => cookie.name === "askdb_session" && cookie.value), "signing out clears the cookie");
  const recent = await page.evaluate(() => window.localStorage.getItem("askdb.recent"));
  check(recent === null, "signing out forgets this browser's recent questions", recent);
  check(problems.length === 0, "the page ran without errors", problems);
} catch (error) {
  console.error("FAILED: " + error.message);
  if (problems.length > 0) console.error("page problems: " + problems.join("\n"));
  try {
    const page = context.pages()[0];
    if (page) await page.screenshot({ path: join(artifacts, "failure-thread.png"), fullPage: true });
  } catch (_) {
    // no screenshot
  }
  exitCode = 1;
} finally {
  for (const what of passed) console.log("ok - " + what);
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(exitCode);

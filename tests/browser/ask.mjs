// Drives askdb's page in Debian's headless Chromium (playwright-core, no browser
// download) as a person would: load the page, ask a question, and check what a person
// must see. Run by tests/browser.rs, which starts `askdb serve`; failures exit non-zero
// with the reason on stderr.
//
// Environment:
//   ASKDB_URL        the page, e.g. http://127.0.0.1:43043/
//   ASKDB_QUESTION   the question to type
//   ASKDB_EXPECT     "scripted": the full check of a scripted answer (the live steps in
//                    order, a failed attempt, a chart and its other kinds, a NULL cell,
//                    the CSV download and TSV copy, the recent questions, the SQL opened
//                    in the console, the SQL console, a phone-sized screenshot);
//                    "live": a real model answered end to end
//   ASKDB_EXPECT_LOCAL_START  "1": the server was started with --local-model on an empty
//                    data directory; the banner must show the local model starting (the
//                    download's bytes and rate), the question is typed while it starts,
//                    and the page asks it once the model answers
//   ASKDB_ARTIFACTS  folder for the screenshots (created)
//   ASKDB_SCREENSHOT file name of the main screenshot (default ask.png)
//   CHROMIUM         the browser binary (default /usr/bin/chromium)
//   ASKDB_WAIT_MS    how long to wait for the answer (default 60000)
//   ASKDB_EXPECT_TRACE  "1": the answer's trace id must be shown

import { chromium } from "playwright-core";
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const url = process.env.ASKDB_URL;
const question = process.env.ASKDB_QUESTION;
const expect = process.env.ASKDB_EXPECT || "scripted";
const artifacts = process.env.ASKDB_ARTIFACTS || "browser-artifacts";
const screenshot = process.env.ASKDB_SCREENSHOT || "ask.png";
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const waitMs = Number(process.env.ASKDB_WAIT_MS || 60000);
const CSV_QUESTION = "Show the tricky rows for the CSV";
const WRONG_PERIOD_QUESTION = "What was the total billed amount per month in 2025, excluding void bills?";
if (!url || !question) {
  console.error("ASKDB_URL and ASKDB_QUESTION are required");
  process.exit(2);
}

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
  deviceScaleFactor: 1,
  permissions: ["clipboard-read", "clipboard-write"],
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
  ],
});

// Anything the page logs as an error, throws, or has blocked by the content security
// policy fails the test: the page must run clean.
const problems = [];
let exitCode = 0;
try {
  const page = context.pages()[0] || (await context.newPage());
  page.on("console", (message) => {
    // Chromium logs every failed fetch as an error. Two are states the page shows by
    // design: 404 from /api/eval (no summary committed: the card stays hidden) and 503
    // from /api/health (a check failed: its pill turns red, with the reason).
    const source = message.location().url || "";
    const expected = message.text().startsWith("Failed to load resource")
      && (source.endsWith("/api/eval") || source.endsWith("/api/health"));
    if (message.type() === "error" && !expected) problems.push("console: " + message.text());
  });
  page.on("pageerror", (error) => problems.push("page error: " + error.message));
  page.on("requestfailed", (request) => problems.push("request failed: " + request.url()));

  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("#schema-list details", { timeout: 15000 });
  const tables = await page.locator("#schema-list details").count();
  check(tables > 0, "the schema browser lists the tables", tables);
  await page.waitForSelector("#status .pill", { timeout: 60000 });

  if (expect === "scripted") {
    const bad = await page.$$eval("#status .pill.bad", (pills) => pills.map((pill) => pill.textContent + ": " + pill.title));
    check(bad.length === 0, "every health check passed", bad);
    const pills = await page.textContent("#status");
    check(pills.includes("read-only, checked"), "the health bar says read-only was checked", pills);
  }

  const localStart = process.env.ASKDB_EXPECT_LOCAL_START === "1";
  const seenLocal = [];
  if (localStart) {
    await page.waitForSelector("#local-model:not([hidden])", { timeout: 30000 });
    check(await page.isVisible("#banner"), "the banner says the local model is starting");
    // Every status sentence the banner shows while the question waits.
    await page.exposeFunction("askdbSeen", (text) => { if (text && !seenLocal.includes(text)) seenLocal.push(text); });
    await page.evaluate(() => {
      const node = document.getElementById("local-model-text");
      window.askdbSeen(node.textContent);
      new MutationObserver(() => window.askdbSeen(node.textContent)).observe(node, { childList: true, characterData: true, subtree: true });
    });
  }
  await page.fill("#question", question);
  await page.press("#question", "Enter"); // keyboard submit
  if (localStart) {
    // Mid-download (a unit above bytes: something has arrived), for the screenshot.
    await page.waitForFunction(() => /Downloading the model \(once\): [\d.]+ [KMG]B of .+ at .+\/s/.test(document.getElementById("local-model-text").textContent)
      || document.querySelector('#steps li[data-step="schema_selected"]'), null, { timeout: 600000 });
    if (await page.isVisible("#local-model-bar")) {
      await page.screenshot({ path: join(artifacts, "local-model-download.png"), fullPage: true });
      passed.push("screenshot " + join(artifacts, "local-model-download.png"));
    }
  }
  if (expect === "scripted") {
    // The script delays the first model reply, so the indicator must be visible, and
    // the steps before the model call must already be on the page: streamed, not
    // shown at the end.
    await page.waitForSelector("#progress:not([hidden])", { timeout: 5000 });
    check(await page.isDisabled("#ask-button"), "the Ask button is disabled while the model works");
    await page.waitForSelector('#steps li[data-step="schema_selected"]', { timeout: 5000 });
    check(await page.isVisible("#progress"), "the tables chosen are shown while the model is still working");
    check(!(await page.isVisible("#result")), "no result yet while the steps arrive");
    await page.screenshot({ path: join(artifacts, "steps-live.png"), fullPage: true });
    passed.push("screenshot " + join(artifacts, "steps-live.png"));
  }
  await page.waitForSelector("#result:not([hidden])", { timeout: waitMs });
  await page.waitForSelector("#progress[hidden]", { state: "attached", timeout: waitMs });

  const decision = (await page.textContent("#decision")).trim();
  const answer = (await page.textContent("#answer")).trim();
  const sql = (await page.textContent("#sql")).trim();
  console.log("decision: " + decision);
  console.log("answer: " + answer);
  console.log("sql: " + sql);
  check(decision === "Answer", "the question was answered", { decision, answer });
  check(answer.length > 0, "the answer is shown");
  check(await page.isVisible("#sql-box"), "the SQL is shown without a toggle");
  check(/select/i.test(sql), "the SQL is the statement that ran", sql);
  await page.waitForSelector("#grid table", { timeout: 5000 });
  const cells = await page.locator("#grid td").count();
  check(cells > 0, "the result grid has cells", cells);
  if (localStart) {
    console.log("local model, as the banner showed it:\n  " + seenLocal.join("\n  "));
    check(seenLocal.some((text) => /Downloading the model \(once\): [\d.]+ [KMG]?B of 1\.1 GB at [\d.]+ [KMG]?B\/s/.test(text)), "the banner showed the download's bytes and rate", seenLocal);
    check(seenLocal.some((text) => text.startsWith("Loading the model")), "the banner showed the model loading", seenLocal);
    check(await page.isHidden("#banner"), "the banner is gone once the model answers");
  }

  if (expect === "scripted") {
    check(answer.includes("Sharma Constructions"), "the model's explanation is the answer", answer);

    // The live steps, in the order they happened: rules, tables, the SQL written and
    // guarded, the failure and its repair, the repaired SQL run, the answer written.
    const steps = await page.$$eval("#steps li", (items) => items.map((item) => ({
      step: item.dataset.step,
      time: item.querySelector(".step-time").textContent,
      text: item.querySelector(".step-text").textContent,
      bad: item.classList.contains("bad"),
    })));
    console.log("steps:\n" + steps.map((item) => "  " + item.time + "  " + item.text).join("\n"));
    const order = ["rules", "schema_selected", "model_call", "guard", "failed", "model_call", "guard", "executed", "model_call", "finished"];
    let reached = 0;
    for (const item of steps) if (reached < order.length && item.step === order[reached]) reached += 1;
    check(reached === order.length, "the steps arrived in order", steps.map((item) => item.step));
    check(steps.every((item) => /^\d+\.\d s$/.test(item.time)), "every step shows its time", steps.map((item) => item.time));
    const failedStep = steps.find((item) => item.step === "failed");
    check(failedStep && failedStep.bad && /repair/.test(failedStep.text), "the failed attempt is marked and says it is repaired", failedStep);
    check(steps.some((item) => item.step === "model_call" && /rewrote the SQL/.test(item.text)), "the repair is a step of its own", steps.map((item) => item.text));
    check(sql.includes("cust_name"), "the SQL shown is the repaired one", sql);

    const attempts = page.locator("#attempts details");
    check((await attempts.count()) === 1, "one failed attempt is listed", await attempts.count());
    check((await attempts.first().getAttribute("open")) === null, "the failed attempt is collapsed");
    const attemptType = (await page.textContent("#attempts details .error-type")).trim();
    check(attemptType === "absent_column", "the failed attempt shows its error type", attemptType);
    await attempts.first().locator("summary").click();
    check(await attempts.first().locator("pre").isVisible(), "opening the attempt shows its SQL");

    const nulls = page.locator("#grid td .null");
    check((await nulls.count()) >= 1, "a NULL cell is shown as a NULL badge", await nulls.count());
    const nullStyle = await nulls.first().evaluate((node) => {
      const style = getComputedStyle(node);
      return { fontStyle: style.fontStyle, text: node.textContent };
    });
    check(nullStyle.fontStyle === "italic" && nullStyle.text === "NULL", "the NULL badge looks unlike a value", nullStyle);

    const chartBox = await page.locator("#chart").boundingBox();
    check(chartBox && chartBox.width > 100 && chartBox.height > 100, "the chart is drawn with a real size", chartBox);
    const chartKind = await page.evaluate(() => {
      const instance = window.Chart && window.Chart.getChart(document.getElementById("chart"));
      return instance ? instance.config.type + ":" + instance.data.labels.length : null;
    });
    check(chartKind === "bar:6", "the chart is a bar chart of the six rows", chartKind);
    const kinds = await page.$$eval("#chart-kind option", (options) => options.map((option) => option.value));
    check(JSON.stringify(kinds) === JSON.stringify(["none", "bar", "line"]), "the chart types that fit a label and a count are offered", kinds);
    await page.selectOption("#chart-kind", "line");
    const switched = await page.evaluate(() => window.Chart.getChart(document.getElementById("chart")).config.type);
    check(switched === "line", "the chart switches to a line chart", switched);
    await page.selectOption("#chart-kind", "none");
    check(await page.isHidden("#chart-box"), "table only hides the chart");
    await page.selectOption("#chart-kind", "bar");

    check((await page.locator("#assumptions li").count()) === 1, "the model's assumption is listed");
    const meta = await page.textContent("#result-meta");
    check(meta.includes("2 attempts"), "the attempts count is shown", meta);
    if (process.env.ASKDB_EXPECT_TRACE === "1") {
      check(/trace [0-9a-f]{32}/.test(meta), "the question's trace id is shown", meta);
    }

    await page.click("#copy-sql");
    await page.waitForFunction(() => document.getElementById("copy-sql").textContent !== "Copy", null, { timeout: 3000 });
    const copied = await page.evaluate(() => navigator.clipboard.readText().catch(() => null));
    check(copied === sql, "the copy button copies the SQL", copied);

    await page.click("#copy-tsv");
    await page.waitForFunction(() => document.getElementById("copy-tsv").textContent !== "Copy as TSV", null, { timeout: 3000 });
    const tsv = await page.evaluate(() => navigator.clipboard.readText().catch(() => null));
    check(tsv && tsv.startsWith("customer\tbills\n\t980\n"), "Copy as TSV copies the rows, NULL as an empty field", tsv);

    const recent = await page.$$eval("#recent-list button", (buttons) => buttons.map((button) => button.textContent));
    check(recent[0] === question, "the question is first among the recent questions", recent);

    await page.click("#edit-sql");
    check((await page.inputValue("#console-sql")) === sql, "Edit in console puts the SQL in the console", await page.inputValue("#console-sql"));
    await page.click("#console-run");
    await page.waitForSelector("#console-result table", { timeout: 10000 });
    check((await page.locator("#console-result tbody tr").count()) === 6, "the SQL re-runs in the console");

    // The rows as CSV: quoting, NULL, formula-looking text, and money shown in the
    // notes' currency on the page but written plain in the file. Each unrelated question
    // starts a new conversation, as a person would (thread.mjs drives follow-ups).
    await page.click("#new-conversation");
    await page.fill("#question", CSV_QUESTION);
    await page.press("#question", "Enter");
    await page.waitForFunction((text) => document.getElementById("result-question").textContent === text
      && document.getElementById("progress").hidden, CSV_QUESTION, { timeout: 15000 });
    const moneyCell = (await page.textContent("#grid tbody tr td:nth-child(2)")).trim();
    check(moneyCell.includes("₹") && moneyCell.includes("1,234.50"), "money is shown in the currency the notes declare (INR)", moneyCell);
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#download-csv")]);
    const csvPath = join(artifacts, "result.csv");
    await download.saveAs(csvPath);
    const csv = readFileSync(csvPath, "utf8");
    const q = String.fromCharCode(34);
    const expectedCsv = "name,amount,note,formula\r\n"
      + q + "Sharma, " + q + q + "the builders" + q + q + q + ",1234.5,,'=1+1\r\n"
      + q + "line one\nline two" + q + ",-3,plain,'-2\r\n";
    check(csv === expectedCsv, "the CSV download holds the rows, quoted by RFC 4180", { csv, expectedCsv });
    check(download.suggestedFilename().endsWith(".csv"), "the download is a .csv file", download.suggestedFilename());

    // A wrong-period answer: the rule checks fail, the one repair fails them again, and
    // the answer is shown with a visible warning that names each failed check.
    await page.click("#new-conversation");
    await page.fill("#question", WRONG_PERIOD_QUESTION);
    await page.press("#question", "Enter");
    await page.waitForFunction((text) => document.getElementById("result-question").textContent === text
      && document.getElementById("progress").hidden, WRONG_PERIOD_QUESTION, { timeout: 15000 });
    check(await page.isVisible("#warnings"), "a wrong-period answer is shown with a visible warning");
    const warningText = await page.textContent("#warnings");
    console.log("warning: " + warningText.replace(/\s+/g, " ").trim());
    check(warningText.includes("may be wrong") && warningText.includes("2026")
      && warningText.includes("(period_rows)") && warningText.includes("(grouping)"), "the warning says which checks failed and the fact", warningText);
    check((await page.textContent("#decision")).trim() === "Answer, flagged", "the flagged answer is not shown as a plain answer");
    const flaggedAnswer = await page.textContent("#answer");
    check(flaggedAnswer.includes("₹611,706.5") && !flaggedAnswer.includes("$"), "the written answer's money is in the notes' currency", flaggedAnswer);
    const suspectSteps = await page.$$eval("#steps li", (items) => items.map((item) => item.querySelector(".step-text").textContent));
    check(suspectSteps.some((text) => /do not fit the question.*repair/.test(text))
      && suspectSteps.some((text) => /answering with a warning/.test(text)), "the steps show the suspect repair and the warned answer", suspectSteps);
    await page.screenshot({ path: join(artifacts, "warning.png"), fullPage: true });
    passed.push("screenshot " + join(artifacts, "warning.png"));

    // A recent question asks again.
    await page.locator("#recent-list button", { hasText: question }).click();
    await page.waitForFunction((text) => document.getElementById("result-question").textContent === text
      && document.getElementById("progress").hidden, question, { timeout: 15000 });
    check((await page.textContent("#answer")).includes("Sharma Constructions"), "a recent question re-runs");
    check(await page.isHidden("#warnings"), "an answer that passes its checks shows no warning");

    // The SQL console: the gate's rows, and NULL next to an empty string.
    await page.fill("#console-sql", "SELECT '' AS empty_text, NULL AS no_value, 42 AS answer");
    await page.press("#console-sql", "Control+Enter");
    await page.waitForSelector("#console-result table", { timeout: 10000 });
    const consoleCells = await page.$$eval("#console-result td", (tds) =>
      tds.map((td) => ({ text: td.textContent, badge: td.querySelector(".null") !== null })));
    check(consoleCells.length === 3, "the console shows the row", consoleCells);
    check(consoleCells[0].text === "" && !consoleCells[0].badge, "an empty string is an empty cell", consoleCells[0]);
    check(consoleCells[1].text === "NULL" && consoleCells[1].badge, "NULL is a badge, not text", consoleCells[1]);

    await page.fill("#console-sql", "DELETE FROM bills");
    await page.click("#console-run");
    await page.waitForSelector("#console-result .error-box", { timeout: 10000 });
    const refusal = await page.textContent("#console-result .error-box");
    check(refusal.includes("rejected"), "a write in the console is refused with its error type", refusal);
    await page.fill("#console-sql", "SELECT status, count(*) AS bills FROM bills GROUP BY status");
    await page.click("#console-run");
    await page.waitForSelector("#console-result table", { timeout: 10000 });

    // The latest evaluation numbers, from the summary tests/browser.rs committed to the
    // server's eval folder.
    await page.waitForSelector("#eval-card:not([hidden])", { timeout: 5000 });
    const evalText = await page.textContent("#eval-card");
    check(evalText.includes("80.0%") && evalText.includes("32 of 40") && evalText.includes("baseline"), "the latest evaluation numbers are shown", evalText);
    check(evalText.includes("replayed") && !evalText.includes("3.1 s"), "a replayed baseline shows no latency of its own", evalText);
  }

  await page.evaluate(() => window.scrollTo(0, 0)); // the schema column is sticky
  await page.screenshot({ path: join(artifacts, screenshot), fullPage: true });
  passed.push("screenshot " + join(artifacts, screenshot));

  if (expect === "scripted") {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(300); // the chart resizes on the next frame
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(overflow <= 1, "nothing is wider than a phone screen", overflow);
    await page.screenshot({ path: join(artifacts, "ask-phone.png"), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });

    // A vague word: askdb asks back with options; clicking one asks the clarified
    // question (what the agent then does with it is the agent's business).
    await page.click("#new-conversation");
    await page.fill("#question", "Who are our best customers?");
    await page.click("#ask-button");
    await page.waitForSelector("#clarify:not([hidden]) #clarify-options button", { timeout: 10000 });
    check((await page.textContent("#decision")).trim() === "Needs clarifying", "a vague question is clarified");
    const option = (await page.textContent("#clarify-options button >> nth=1")).trim();
    await page.click("#clarify-options button >> nth=1");
    const clarified = "Who are our best customers? (" + option + ")";
    await page.waitForFunction((text) => document.getElementById("result-question").textContent === text
      && document.getElementById("progress").hidden, clarified, { timeout: 10000 });
    check((await page.inputValue("#question")) === clarified, "clicking an option asks the clarified question", clarified);
  }

  check(problems.length === 0, "the page ran without errors", problems);
} catch (error) {
  console.error("FAILED: " + error.message);
  if (problems.length > 0) console.error("page problems: " + problems.join("\n"));
  try {
    const page = context.pages()[0];
    if (page) await page.screenshot({ path: join(artifacts, "failure-" + screenshot), fullPage: true });
  } catch (_) {
    // The failure itself is what matters.
  }
  exitCode = 1;
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
for (const what of passed) console.log("ok: " + what);
process.exit(exitCode);

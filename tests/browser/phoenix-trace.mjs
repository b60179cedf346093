// A screenshot of one trace in Phoenix's own UI, for the README: opens the trace by its
// OpenTelemetry id (Phoenix's /redirects/traces/ID), waits for the span tree, selects
// one span, and writes the PNG. Run by scripts/phoenix-screenshot.sh.
//
// Environment:
//   PHOENIX_URL   e.g. http://127.0.0.1:6006
//   TRACE_ID      the trace (32 hex digits)
//   SELECT_SPAN   the name of the span to select (its first occurrence), optional
//   OUT           the PNG to write
//   CHROMIUM      the browser binary (default /usr/bin/chromium)

import { chromium } from "playwright-core";

const base = process.env.PHOENIX_URL;
const trace = process.env.TRACE_ID;
const out = process.env.OUT || "phoenix-trace.png";
if (!base || !trace) {
  console.error("PHOENIX_URL and TRACE_ID are required");
  process.exit(2);
}
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 }, deviceScaleFactor: 1 });
  await page.goto(`${base}/redirects/traces/${trace}`, { waitUntil: "networkidle" });
  await page.getByText("repair-sql").first().waitFor({ timeout: 30000 });
  // The first execute-sql is the failed run: select it, so its error shows.
  if (process.env.SELECT_SPAN) {
    await page.getByText(process.env.SELECT_SPAN, { exact: true }).first().click();
  }
  await page.waitForTimeout(1500);
  await page.screenshot({ path: out });
  console.log(`wrote ${out} from ${page.url()}`);
} finally {
  await browser.close();
}

// The page's "Latest evaluation" card: GET /api/eval's summary (the accuracy of each
// mode with its 95% interval, what the agent rescued, the median latency), hidden when
// the server has none. Reaches app.js's helpers through window.askdbPage.
(function () {
  "use strict";

  const page = window.askdbPage;
  if (!page) return;
  const { $, el, clear, api, numberFormat } = page;

  // ---- Latest evaluation ----

  const percent = (value) => (typeof value === "number" ? (value * 100).toFixed(1) + "%" : "–");

  function rateCell(rate) {
    if (!rate || typeof rate !== "object") return el("td", { class: "num", text: "–" });
    const interval = rate.wilson95 ? "95% interval " + percent(rate.wilson95.lower) + "–" + percent(rate.wilson95.upper) : null;
    return el("td", { class: "num", title: interval }, [
      el("span", { class: "rate", text: percent(rate.rate) }),
      el("span", { class: "of", text: rate.successes + " of " + rate.total }),
    ]);
  }

  async function load() {
    const response = await api("GET", "/api/eval");
    if (!response.ok || !response.body || typeof response.body !== "object") return; // 404: stays hidden
    const summary = response.body;
    const body = $("eval-body");
    clear(body);
    const model = summary.model && typeof summary.model === "object" ? [summary.model.provider, summary.model.model].filter(Boolean).join(" ") : summary.model;
    const about = [summary.set ? "set " + summary.set : null, model || null, summary.generated_at || null].filter(Boolean).join(" · ");
    if (about) body.append(el("p", { class: "eval-meta", text: about }));
    const modes = summary.modes && typeof summary.modes === "object" ? summary.modes : null;
    // With a shared first reply the baseline replays the agent's first reply from the
    // run's cache: its latency was not measured, and one attempt rescues nothing.
    const replayed = (name) => name === "baseline" && summary.settings && summary.settings.shared_first_reply === true;
    const singleAttempt = (name) => name === "baseline" || name === "plain";
    if (modes) {
      const rows = Object.entries(modes).map(([name, metrics]) => el("tr", {}, [
        el("th", { scope: "row", text: name }),
        rateCell(metrics.accuracy),
        singleAttempt(name)
          ? el("td", { class: "num muted", text: "–", title: "one attempt: nothing to rescue" })
          : el("td", { class: "num", text: percent(metrics.rescue_rate) }),
        replayed(name)
          ? el("td", { class: "num muted", text: "replayed", title: "the baseline replays the agent's first reply from the run's cache, so its latency is not measured" })
          : el("td", { class: "num", text: typeof metrics.latency_p50_ms === "number" ? (metrics.latency_p50_ms / 1000).toFixed(1) + " s" : "–" }),
      ]));
      body.append(el("table", {}, [
        el("thead", {}, [el("tr", {}, ["mode", "accuracy", "rescued", "p50"].map((name) => el("th", { scope: "col", text: name })))]),
        el("tbody", {}, rows),
      ]));
    } else {
      // A summary of another shape: its top-level numbers, as written.
      const numbers = Object.entries(summary).filter(([, value]) => typeof value === "number");
      body.append(el("table", {}, [el("tbody", {}, numbers.map(([name, value]) => el("tr", {}, [el("th", { scope: "row", text: name }), el("td", { class: "num", text: numberFormat.format(value) })])))]));
    }
    const source = response.headers && response.headers.get("x-askdb-eval-source");
    // The server names the file: evals/results/... for the summaries built in, or a
    // path inside --eval-dir.
    if (source) body.append(el("p", { class: "eval-meta", text: "from " + source }));
    $("eval-card").hidden = false;
  }

  page.evaluation = { load };
})();

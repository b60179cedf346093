// askdb's page: asks the JSON API (/api/ask, /api/sql, /api/schema, /api/eval,
// /api/health) and shows the answers. Every value from the server or the user reaches
// the page through textContent or an attribute, never parsed as HTML, so data
// (which may hold text planted in the database) can never become markup.
(function () {
  "use strict";

  const $ = (id) => document.getElementById(id);

  // Builds an element: el("td", {class: "num", text: "3", title: "..."}, [children]).
  function el(tag, props, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "class") node.className = value;
      else if (key === "on") for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
      else node.setAttribute(key, String(value));
    }
    for (const child of children || []) if (child) node.append(child);
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  const numberFormat = new Intl.NumberFormat(undefined, { maximumFractionDigits: 4 });

  // Calls the API; resolves to {status, ok, body} whatever the status, and turns a
  // network failure into the same shape so callers have one path.
  async function api(method, path, payload) {
    const init = { method, headers: { Accept: "application/json" } };
    if (payload !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(payload);
    }
    try {
      const response = await fetch(path, init);
      let body = null;
      try {
        body = await response.json();
      } catch (_) {
        body = { error: "unreadable_response", detail: "the server sent something that is not JSON (HTTP " + response.status + ")" };
      }
      return { status: response.status, ok: response.ok, body, headers: response.headers };
    } catch (error) {
      return { status: 0, ok: false, body: { error: "network_error", detail: "askdb cannot be reached: " + error.message } };
    }
  }

  // ---- The result grid: NULL is a grey badge, an empty string an empty cell ----

  function cell(value) {
    if (value === null || value === undefined) {
      return el("td", { class: "is-null" }, [el("span", { class: "null", text: "NULL", title: "SQL NULL: no value" })]);
    }
    if (typeof value === "number") {
      return el("td", { class: "num", text: numberFormat.format(value), title: String(value) });
    }
    if (typeof value === "boolean") return el("td", { text: value ? "true" : "false" });
    if (typeof value === "object") return el("td", { text: JSON.stringify(value) });
    const text = String(value);
    return el("td", { class: text === "" ? "is-empty" : null, text, title: text.length > 40 ? text : null });
  }

  function renderGrid(target, columns, rows, note) {
    clear(target);
    if (!columns || columns.length === 0) return;
    // A column whose values are all numbers (or NULL) is right-aligned, header included.
    const numeric = columns.map((_, index) => rows.some((row) => typeof row[index] === "number")
      && rows.every((row) => row[index] === null || typeof row[index] === "number"));
    const head = el("tr", {}, columns.map((name, index) => el("th", { scope: "col", class: numeric[index] ? "num" : null, text: name })));
    const body = el("tbody", {}, rows.map((row) => el("tr", {}, row.map(cell))));
    target.append(el("table", {}, [el("thead", {}, [head]), body]));
    if (note) target.after(note);
  }

  function gridNote(rowCount, truncated) {
    const text = rowCount + (rowCount === 1 ? " row" : " rows") + (truncated ? " (the row cap was reached; more rows may exist)" : "");
    return el("p", { class: "grid-note", text });
  }

  // ---- Chart (Chart.js, vendored) ----

  let chart = null;
  const palette = ["#4338ca", "#0ea5e9", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6"];

  function renderChart(spec, columns, rows) {
    const box = $("chart-box");
    if (chart) {
      chart.destroy();
      chart = null;
    }
    box.hidden = true;
    if (!spec || spec.kind === "none" || !spec.x || !spec.y || spec.y.length === 0 || !window.Chart) return;
    const xIndex = columns.indexOf(spec.x);
    const yIndexes = spec.y.map((name) => columns.indexOf(name)).filter((index) => index >= 0);
    if (xIndex < 0 || yIndexes.length === 0) return;
    const label = (value) => (value === null || value === undefined ? "NULL" : String(value));
    let config;
    if (spec.kind === "scatter") {
      const y = yIndexes[0];
      config = {
        type: "scatter",
        data: { datasets: [{ label: columns[y], data: rows.map((row) => ({ x: row[xIndex], y: row[y] })), backgroundColor: palette[0] }] },
        options: { scales: { x: { title: { display: true, text: spec.x } }, y: { title: { display: true, text: columns[y] } } } },
      };
    } else {
      config = {
        type: spec.kind === "line" ? "line" : "bar",
        data: {
          labels: rows.map((row) => label(row[xIndex])),
          datasets: yIndexes.map((y, n) => ({
            label: columns[y],
            data: rows.map((row) => (typeof row[y] === "number" ? row[y] : null)),
            backgroundColor: palette[n % palette.length] + (spec.kind === "line" ? "33" : "d0"),
            borderColor: palette[n % palette.length],
            borderWidth: spec.kind === "line" ? 2 : 0,
            borderRadius: 4,
            tension: 0.25,
            fill: false,
          })),
        },
        options: { scales: { y: { beginAtZero: true } } },
      };
    }
    config.options.responsive = true;
    config.options.maintainAspectRatio = false;
    config.options.animation = false;
    config.options.plugins = { legend: { display: yIndexes.length > 1 || spec.kind === "scatter" } };
    box.hidden = false;
    chart = new window.Chart($("chart"), config);
  }

  // ---- Asking ----

  const DECISION_LABELS = { answer: "Answer", clarify: "Needs clarifying", decline: "Declined", give_up: "Gave up", error: "Error" };

  let busy = false;
  let timer = null;

  function setBusy(on) {
    busy = on;
    $("ask-button").disabled = on;
    $("ask-form").setAttribute("aria-busy", on ? "true" : "false");
    $("progress").hidden = !on;
    clearInterval(timer);
    if (on) {
      const started = Date.now();
      const tick = () => {
        const seconds = Math.floor((Date.now() - started) / 1000);
        $("progress-text").textContent = "The model is working" + (seconds > 0 ? " · " + seconds + " s" : "") + "…";
      };
      tick();
      timer = setInterval(tick, 500);
    }
  }

  function mode() {
    const checked = document.querySelector('input[name="mode"]:checked');
    return checked ? checked.value : "agent";
  }

  async function ask(question) {
    question = question.trim();
    if (!question || busy) {
      if (!question) $("question").focus();
      return;
    }
    $("question").value = question;
    setBusy(true);
    const response = await api("POST", "/api/ask", { question, mode: mode() });
    setBusy(false);
    if (response.ok) showResult(response.body);
    else showError(question, response);
  }

  function resetResult() {
    $("result").hidden = false;
    for (const id of ["unverified", "clarify", "assumptions-box", "sql-box", "attempts-box", "chart-box"]) $(id).hidden = true;
    $("answer").className = "answer";
    clear($("grid"));
    document.querySelectorAll("#result .grid-note").forEach((node) => node.remove());
    $("result-meta").textContent = "";
    if (chart) {
      chart.destroy();
      chart = null;
    }
  }

  function showError(question, response) {
    resetResult();
    const body = response.body || {};
    const decision = $("decision");
    decision.className = "badge error";
    decision.textContent = response.status ? "Error " + response.status : "Error";
    $("result-question").textContent = question;
    $("answer").className = "answer error-text";
    $("answer").textContent = body.detail || body.error || "the request failed";
    if (body.error === "model_not_configured") showBanner(body.detail);
  }

  function showResult(result) {
    resetResult();
    const decision = $("decision");
    decision.className = "badge " + result.decision;
    decision.textContent = DECISION_LABELS[result.decision] || result.decision;
    $("result-question").textContent = result.question;

    let answer = "";
    if (result.decision === "answer") {
      answer = result.explanation || (result.row_count === 1 && result.columns.length === 1
        ? result.columns[0] + ": " + (result.rows[0][0] === null ? "NULL" : String(result.rows[0][0]))
        : result.row_count + (result.row_count === 1 ? " row" : " rows") + " below.");
    } else if (result.decision === "clarify") {
      answer = "The question can be read more than one way.";
    } else {
      answer = result.reason || "askdb could not answer this question.";
    }
    $("answer").textContent = answer;

    if (result.unverified_numbers && result.unverified_numbers.length > 0) {
      $("unverified").hidden = false;
      $("unverified").textContent = "Not found in the rows, so not confirmed: " + result.unverified_numbers.join(", ");
    }

    if (result.clarify) {
      $("clarify").hidden = false;
      $("clarify-question").textContent = result.clarify.question;
      const options = $("clarify-options");
      clear(options);
      for (const option of result.clarify.options || []) {
        // Clicking an option asks the question again with the choice spelled out.
        options.append(el("button", { type: "button", class: "chip", text: option, on: { click: () => ask(result.question + " (" + option + ")") } }));
      }
    }

    if (result.assumptions && result.assumptions.length > 0) {
      $("assumptions-box").hidden = false;
      const list = $("assumptions");
      clear(list);
      for (const assumption of result.assumptions) list.append(el("li", { text: assumption }));
    }

    if (result.sql) {
      $("sql-box").hidden = false;
      $("sql").textContent = result.sql;
    }

    const history = result.history || [];
    if (history.length > 0) {
      $("attempts-box").hidden = false;
      $("attempts-title").textContent = "Failed attempts (" + history.length + ")";
      const list = $("attempts");
      clear(list);
      history.forEach((attempt, index) => {
        list.append(el("details", { class: "attempt" }, [
          el("summary", {}, [
            el("span", { text: "Attempt " + (index + 1) }),
            el("span", { class: "error-type", text: attempt.error_type }),
          ]),
          el("div", { class: "attempt-body" }, [
            el("p", { text: attempt.message }),
            el("pre", {}, [el("code", { text: attempt.sql })]),
          ]),
        ]));
      });
    }

    if (result.decision === "answer") {
      renderChart(result.chart, result.columns, result.rows);
      renderGrid($("grid"), result.columns, result.rows, gridNote(result.row_count, result.truncated));
    }

    const meta = [
      result.mode,
      result.attempts + (result.attempts === 1 ? " attempt" : " attempts"),
      (result.latency_ms / 1000).toFixed(1) + " s",
      (result.tokens.input + result.tokens.output).toLocaleString() + " tokens",
      "$" + Number(result.cost_usd).toFixed(4),
    ];
    if (result.tables_used && result.tables_used.length > 0) meta.push("tables: " + result.tables_used.join(", "));
    $("result-meta").textContent = meta.join(" · ");
  }

  // ---- Copy ----

  async function copyText(text) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch (_) {
      // Plain http on another host is not a secure context: fall back to a selection.
      const area = el("textarea", { "aria-hidden": "true" });
      area.value = text;
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.append(area);
      area.select();
      let done = false;
      try {
        done = document.execCommand("copy");
      } catch (_) {
        done = false;
      }
      area.remove();
      return done;
    }
  }

  // ---- SQL console ----

  async function runConsole() {
    const sql = $("console-sql").value.trim();
    const target = $("console-result");
    if (!sql) {
      $("console-sql").focus();
      return;
    }
    $("console-run").disabled = true;
    clear(target);
    target.append(el("p", { class: "muted", text: "Running…" }));
    const response = await api("POST", "/api/sql", { sql });
    $("console-run").disabled = false;
    clear(target);
    const body = response.body || {};
    if (!response.ok) {
      target.append(el("div", { class: "error-box", text: body.detail || body.error || "the request failed" }));
      return;
    }
    if (body.ok) {
      const grid = el("div", { class: "grid" });
      target.append(grid);
      renderGrid(grid, body.columns, body.rows, gridNote(body.row_count, body.truncated));
      target.append(el("p", { class: "grid-note" }, [el("span", { text: "Ran: " }), el("code", { text: body.sql })]));
    } else {
      const parts = [el("span", { class: "error-type", text: body.error_type }), el("span", { text: body.message })];
      if (body.hint) parts.push(el("div", { class: "muted", text: "Hint: " + body.hint }));
      target.append(el("div", { class: "error-box" }, parts));
    }
  }

  // ---- Schema browser ----

  let schemaTables = [];

  function columnList(table) {
    const keys = new Set(table.primary_key || []);
    return el("ul", { class: "columns" }, table.columns.map((column) => el("li", {}, [
      el("span", { class: "col-name" + (keys.has(column.name) ? " key" : ""), text: column.name, title: keys.has(column.name) ? "primary key" : null }),
      el("span", { class: "col-type", text: (column.data_type || "") + (column.nullable ? "" : " not null") }),
      column.description ? el("span", { class: "col-desc", text: column.description }) : null,
    ])));
  }

  function previewSql(table) {
    const quote = (name) => '"' + name.replace(/"/g, '""') + '"';
    return "SELECT " + table.columns.map((column) => quote(column.name)).join(", ") + " FROM " + quote(table.name) + " LIMIT 20";
  }

  function renderSchema() {
    const list = $("schema-list");
    const filter = $("schema-filter").value.trim().toLowerCase();
    clear(list);
    const shown = schemaTables.filter((table) => !filter
      || table.name.toLowerCase().includes(filter)
      || table.columns.some((column) => column.name.toLowerCase().includes(filter)));
    for (const table of shown) {
      const rows = table.row_count === null || table.row_count === undefined ? "" : table.row_count.toLocaleString() + " rows";
      const details = el("details", {}, [
        el("summary", { title: table.description || null }, [el("span", { class: "table-name", text: table.name }), el("span", { class: "rows", text: rows })]),
        el("div", { class: "table-body" }, [
          table.description ? el("p", { class: "table-desc", text: table.description }) : null,
          columnList(table),
          el("button", {
            type: "button", class: "ghost small", text: "Preview rows",
            on: { click: () => { $("console-sql").value = previewSql(table); runConsole(); } },
          }),
        ]),
      ]);
      if (filter) details.open = true;
      list.append(details);
    }
    if (shown.length === 0) list.append(el("p", { class: "muted", text: "No table or column matches." }));
  }

  async function loadSchema() {
    const response = await api("GET", "/api/schema");
    if (!response.ok) {
      clear($("schema-list"));
      $("schema-list").append(el("div", { class: "error-box", text: (response.body && response.body.detail) || "the schema could not be loaded" }));
      return;
    }
    schemaTables = response.body.tables || [];
    $("schema-count").textContent = schemaTables.length + " tables · " + response.body.dialect;
    renderSchema();
  }

  // ---- Health ----

  function pill(text, state, title) {
    return el("span", { class: "pill " + state, text, title });
  }

  function showBanner(text) {
    $("banner").hidden = false;
    $("banner-text").textContent = text;
  }

  async function loadHealth() {
    const response = await api("GET", "/api/health");
    const body = response.body || {};
    const status = $("status");
    clear(status);
    if (typeof body.ok !== "boolean") {
      status.append(pill("health unknown", "bad", body.detail || ""));
      return;
    }
    const details = body.details || {};
    status.append(pill(body.database + " · " + body.tables + " tables" + (body.database_reachable ? "" : " (unreachable)"), body.database_reachable ? "good" : "bad", details.database));
    status.append(pill(body.read_only_confirmed ? "read-only, checked" : "read-only NOT confirmed", body.read_only_confirmed ? "good" : "bad", details.read_only));
    if (!body.model_configured) {
      status.append(pill("no model", "bad", details.model));
      showBanner(details.model || "");
    } else {
      status.append(pill("model " + body.model + (body.model_reachable ? "" : " (check failed)"), body.model_reachable ? "good" : "bad", details.model));
    }
  }

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

  async function loadEval() {
    const response = await api("GET", "/api/eval");
    if (!response.ok || !response.body || typeof response.body !== "object") return; // 404: stays hidden
    const summary = response.body;
    const body = $("eval-body");
    clear(body);
    const model = summary.model && typeof summary.model === "object" ? [summary.model.provider, summary.model.model].filter(Boolean).join(" ") : summary.model;
    const about = [summary.set ? "set " + summary.set : null, model || null, summary.generated_at || null].filter(Boolean).join(" · ");
    if (about) body.append(el("p", { class: "eval-meta", text: about }));
    const modes = summary.modes && typeof summary.modes === "object" ? summary.modes : null;
    if (modes) {
      const rows = Object.entries(modes).map(([name, metrics]) => el("tr", {}, [
        el("th", { scope: "row", text: name }),
        rateCell(metrics.accuracy),
        el("td", { class: "num", text: percent(metrics.rescue_rate) }),
        el("td", { class: "num", text: typeof metrics.latency_p50_ms === "number" ? (metrics.latency_p50_ms / 1000).toFixed(1) + " s" : "–" }),
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
    if (source) body.append(el("p", { class: "eval-meta", text: "from evals/results/" + source }));
    $("eval-card").hidden = false;
  }

  // ---- Wiring ----

  document.addEventListener("DOMContentLoaded", () => {
    $("ask-form").addEventListener("submit", (event) => {
      event.preventDefault();
      ask($("question").value);
    });
    $("question").addEventListener("keydown", (event) => {
      // Enter asks (Ctrl/Cmd+Enter too); Shift+Enter is a new line; IME composition is left alone.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        ask($("question").value);
      }
    });
    $("console-sql").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        runConsole();
      }
    });
    $("console-run").addEventListener("click", runConsole);
    $("schema-filter").addEventListener("input", renderSchema);
    $("copy-sql").addEventListener("click", async () => {
      const done = await copyText($("sql").textContent);
      $("copy-sql").textContent = done ? "Copied" : "Select and copy";
      setTimeout(() => { $("copy-sql").textContent = "Copy"; }, 1500);
    });
    loadSchema();
    loadHealth();
    loadEval();
    $("question").focus();
  });
})();

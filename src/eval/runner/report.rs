//! `report.md` of a run: the summary of each mode and the paired difference as
//! Markdown, with the rate and strategy texts the CLI also prints.

use crate::eval::metrics::{self, ModelSpeed, Summary};

use super::RunSummary;

fn percent(value: Option<f64>) -> String {
    value
        .map(|value| format!("{:.1}%", value * 100.0))
        .unwrap_or_else(|| "-".to_string())
}

/// Accuracy with its Wilson interval, as `61.3% [53.4, 68.7]`.
pub fn rate_text(rate: &metrics::Rate) -> String {
    match (&rate.rate, &rate.wilson95) {
        (Some(value), Some(interval)) => format!(
            "{:.1}% [{:.1}, {:.1}] ({}/{})",
            value * 100.0,
            interval.lower * 100.0,
            interval.upper * 100.0,
            rate.successes,
            rate.total
        ),
        _ => "-".to_string(),
    }
}

/// The human report of a run.
/// A run's strategy as the reports show it.
pub fn strategy_text(strategy: &str) -> String {
    if strategy.is_empty() {
        "json actions, one candidate (recorded before strategies were)".to_string()
    } else {
        strategy.to_string()
    }
}

pub fn render_report(summary: &RunSummary) -> String {
    let mut out = format!(
        "# askdb evaluation: {} ({})\n\nmodel: {} {} at {}; generated {} UTC; askdb {}\n\nsettings: row cap {}, schema budget {} tokens, k {}, temperature {}, explanation {}, at most {} attempts, strategy {}{}{}\n\n",
        summary.set,
        summary.run,
        summary.model.provider,
        summary.model.model,
        summary.model.endpoint,
        summary.generated_at,
        summary.askdb_version,
        summary.settings.row_cap,
        summary.settings.budget_tokens,
        summary.settings.k,
        summary.settings.temperature,
        if summary.settings.explain { "on" } else { "off" },
        summary.settings.max_attempts,
        strategy_text(&summary.settings.strategy),
        summary.settings.sample.map(|n| match summary.settings.sample_offset {
            0 => format!(", sample of {n} with seed {}", summary.settings.seed),
            offset => format!(", sample of {n} with seed {} after the first {offset}", summary.settings.seed),
        }).unwrap_or_default(),
        summary.settings.limit.map(|n| format!(", first {n}")).unwrap_or_default(),
    );
    match summary.settings.ask_path {
        super::AskPath::Harness => {}
        super::AskPath::Process => out.push_str(
            "The agent was asked through one `askdb ask --json --no-explain` process per \
             question (mode by mode, database by database), as a user or a script asks; its \
             latencies are the processes' wall times, and no prompt was warmed for it.\n\n",
        ),
        super::AskPath::Serve => out.push_str(
            "The agent was asked with `POST /api/ask` (no explanation) on an `askdb serve` \
             started for each database once its warm-up ended (database by database), as a \
             person at the page asks; its latencies are the requests' wall times.\n\n",
        ),
    }
    if let Some(examples) = &summary.examples {
        out.push_str(&format!(
            "Verified examples ({}): {} of {} agent questions were asked with examples; {} \
             answered by re-running a verified example's SQL without the model, {} of them \
             right{}. `askdb eval compare` pairs this run with one without examples.\n\n",
            examples.source.as_str(),
            examples.with_examples,
            examples.asked,
            examples.reruns,
            examples.reruns_right,
            examples
                .rerun_median_ms
                .map(|ms| format!(" (median {ms} ms)"))
                .unwrap_or_default(),
        ));
    }
    if let Some(warm) = &summary.warm_ups {
        out.push_str(&format!(
            "Before each database's first question its prompt prefixes were read into the model \
             server's cache, as `askdb serve` does when it opens a database: {} prefix(es) ({} \
             restored from the server's saved copies), {:.1} s in all, the longest {:.1} s{}. No \
             question's latency includes them.\n\n",
            warm.prefixes,
            warm.restored,
            warm.total_ms as f64 / 1000.0,
            warm.longest_ms as f64 / 1000.0,
            if warm.failed > 0 {
                format!(
                    ", {} failed (their questions ran on a cold prefix)",
                    warm.failed
                )
            } else {
                String::new()
            }
        ));
    }
    if summary.settings.shared_first_reply {
        out.push_str(
            "The baseline's one call replays the agent's first reply (same request, cached in \
             the run folder): the two modes differ by the loop alone, and the baseline's \
             latency is not measured.\n\n",
        );
    }
    out.push_str("| metric | ");
    let names: Vec<&String> = summary.modes.keys().collect();
    out.push_str(
        &names
            .iter()
            .map(|name| name.as_str())
            .collect::<Vec<_>>()
            .join(" | "),
    );
    out.push_str(" |\n|---|");
    out.push_str(&"---|".repeat(names.len()));
    out.push('\n');
    let row = |label: &str, value: &dyn Fn(&Summary) -> String| {
        let cells: Vec<String> = summary.modes.values().map(value).collect();
        format!("| {label} | {} |\n", cells.join(" | "))
    };
    out.push_str(&row("questions (scored)", &|s| {
        format!("{} ({})", s.questions, s.scored)
    }));
    out.push_str(&row("execution accuracy [Wilson 95%]", &|s| {
        rate_text(&s.accuracy)
    }));
    out.push_str(&row("answerable accuracy", &|s| {
        rate_text(&s.answerable_accuracy)
    }));
    out.push_str(&row("infrastructure failures", &|s| {
        s.infrastructure_failures.to_string()
    }));
    out.push_str(&row("answered / clarified / declined / gave up", &|s| {
        format!(
            "{} / {} / {} / {}",
            s.decisions.answered, s.decisions.clarified, s.decisions.declined, s.decisions.gave_up
        )
    }));
    out.push_str(&row("correct refusals / unanswerable", &|s| {
        format!("{} / {}", s.correct_refusals, s.unanswerable)
    }));
    out.push_str(&row("false refusals", &|s| s.false_refusals.to_string()));
    out.push_str(&row("clarification precision / recall", &|s| {
        format!(
            "{} / {}",
            percent(s.clarification_precision),
            percent(s.clarification_recall)
        )
    }));
    out.push_str(&row("first-attempt failures", &|s| {
        s.first_attempt_failures.to_string()
    }));
    out.push_str(&row("rescued / broken", &|s| {
        format!("{} / {}", s.rescued, s.broken)
    }));
    out.push_str(&row("rescue rate", &|s| percent(s.rescue_rate)));
    out.push_str(&row("mean attempts to success", &|s| {
        s.mean_attempts_to_success
            .map(|v| format!("{v:.2}"))
            .unwrap_or_else(|| "-".into())
    }));
    out.push_str(&row("latency p50 / p95", &|s| {
        format!(
            "{} / {} ms",
            s.latency_p50_ms
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into()),
            s.latency_p95_ms
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into())
        )
    }));
    out.push_str(&row(
        "model server: ms a token written (one reply / candidates side by side) / read; median a question",
        &|s| {
            s.model_speed
                .map(|speed| {
                    format!(
                        "{} / {} / {} ms; {} ms",
                        ModelSpeed::ms_text(speed.ms_per_generated_token),
                        ModelSpeed::ms_text(speed.ms_per_side_by_side_step),
                        ModelSpeed::ms_text(speed.ms_per_prompt_token),
                        speed
                            .server_ms_p50
                            .map(|v| v.to_string())
                            .unwrap_or_else(|| "-".into())
                    )
                })
                .unwrap_or_else(|| "not reported".into())
        },
    ));
    out.push_str(&row("tokens in / out", &|s| {
        format!("{} / {}", s.input_tokens, s.output_tokens)
    }));
    out.push_str(&row("cost", &|s| format!("${:.4}", s.cost_usd)));
    out.push_str(&row("by category", &|s| {
        s.by_category
            .iter()
            .map(|(category, rate)| format!("{category} {}", percent(rate.rate)))
            .collect::<Vec<_>>()
            .join(", ")
    }));
    for (other, paired) in [
        ("baseline", &summary.paired),
        ("plain", &summary.paired_plain),
    ] {
        let Some(paired) = paired else { continue };
        out.push_str(&format!(
            "\nagent - {other} on {} paired questions: {} (bootstrap 95% [{}, {}], {} resamples, seed {}); agent-only wins {}, {other}-only wins {}\n",
            paired.paired,
            paired.mean_difference.map(|d| format!("{:+.1} points", d * 100.0)).unwrap_or_else(|| "-".into()),
            paired.bootstrap95.as_ref().map(|i| format!("{:+.1}", i.lower * 100.0)).unwrap_or_else(|| "-".into()),
            paired.bootstrap95.as_ref().map(|i| format!("{:+.1}", i.upper * 100.0)).unwrap_or_else(|| "-".into()),
            paired.resamples,
            paired.seed,
            paired.agent_only_wins,
            paired.baseline_only_wins
        ));
    }
    if !summary.agent_failures_by_type.is_empty() {
        out.push_str("\nagent failures by kind: ");
        out.push_str(
            &summary
                .agent_failures_by_type
                .iter()
                .map(|(kind, count)| format!("{kind} {count}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
        out.push('\n');
    }
    if !summary.flags.is_empty() {
        out.push_str("\n## Answers flagged by the rule checks\n\n");
        out.push_str(&crate::eval::flags::render(&summary.flags));
    }
    out
}

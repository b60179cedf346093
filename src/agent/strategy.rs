//! How the agent asks for SQL: the knobs of the first attempt and of execution-guided
//! selection, with the measured defaults. Each knob is one line of an ablation in
//! docs/decisions/0009-first-attempt-for-small-models.md; the evaluation harness records
//! the strategy of every run, and `--strategy key=value,...` changes one knob at a time.
//!
//! | knob | values | what it changes |
//! |---|---|---|
//! | `reply` | `sql`, `json`, `field` | a plain SQL reply in a fenced block (begun for the model where the provider continues a turn, ended by a stop sequence); the JSON action object (sql / clarify / decline) under a grammar; or the plain reference prompt's form, its one-line instruction and the one-field `{"sql": ...}` reply, with askdb's schema block, rules and repairs around it |
//! | `first` | `same`, `sql`, `json`, `field` | the reply form of a first question's first greedy round only (`same`: `reply`'s); its doubt's second look, its repairs and every follow-up are asked in `reply`'s form, the failed reply shown to them in that form |
//! | `alias` | `on`, `off` | the rule "give every table an alias and qualify every column" |
//! | `marker` | `on`, `off` | with `reply=sql`: the model may write `-- DECLINE: why` instead of SQL for a write request or data the tables do not hold (off: only askdb's rules decline) |
//! | `cards` | `notes`, `rows` | each table as CREATE TABLE with notes and sample values in comments, or CREATE TABLE with three sample rows |
//! | `schema` | `budget`, `linked` | the whole schema when it fits the token budget (one prompt prefix per database), or always the linked tables |
//! | `n` | 1 to 8 | how many candidates one sampling call asks for |
//! | `when` | `always`, `doubt` | sample candidates for every question, or only when the first (greedy) result is doubtful: an error, a refusal, no rows, only NULLs |
//! | `t` | 0.0 to 1.5 | the temperature of the sampled candidates |
//! | `hints` | `full`, `lean`, `fit` | with `reply=sql`: the instruction to join on the keys shown and the dialect's date functions; or only "join just the tables the question needs" and no dialect paragraph; or the full instruction with the date functions only when the tables hold dates, and a year stored alone compared as a number |
//! | `repair` | `sampled`, `greedy` | a repair after a failure asks for the strategy's `n` candidates at its temperature (they vote), or for one greedy reply (the default, decision 0092: on a few CPU cores a step of five replies side by side takes several times one reply's); a reply identical to a failed one is always answered by sampled candidates |
//! | `groups` | `on`, `off` | with `reply=sql`: the rule "when the question asks for a value for each group, select the group's column too" |
//! | `budget` | `off`, 1 to 600 | seconds a question may take: no model round starts when the round before it, taken again, would end past the budget (a rule's own rewrite still runs; the question ends in an answer with warnings or an honest give-up) |
//! | `follow` | `message`, `system`, `prefill` | with `reply=sql`: what a follow-up is asked to do (one standalone SELECT, opened with its restatement) is said at the end of the follow-up's own message, or once in the system prompt, where the server holds it in every question's cached prefix (measured in decision 0011: the local 1.5B model then stops writing the restatement); `prefill` says it in the system prompt and begins a follow-up's reply with the restatement's marker for the model, so it writes the restatement with nothing in its message asking for it (a provider that does not continue a begun reply, such as OpenAI's own API, gets `system`) |
//! | `examples` | `block`, `turns` | verified examples like a first question: one block of question and SQL pairs in the question's own message, best first; or each as an exchange of its own before the question (the example's question as a user message, its SQL as the model's reply), best last; a follow-up always gets the block, so its conversation stays the turns before it |
//! | `ex_n` | 1 to 8 | how many verified examples like the question are shown at most, the most alike first (default 3); each is read anew after the cached prefix every round |
//! | `conf` | `off`, -10.0 to 0.0 | with `when=doubt`: a greedy reply whose least likely token has a log-probability below this is doubtful too (the model hesitated over a column, a table or a join), and its result votes with sampled candidates; needs a server that gives log-probabilities |

use std::fmt;
use std::ops::RangeInclusive;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The most candidates one call may ask for (llama.cpp decodes at most as many as it has
/// slots).
pub const MAX_CANDIDATES: u32 = 8;

/// The most verified examples one prompt may show.
pub const MAX_EXAMPLES_SHOWN: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyFormat {
    /// SQL in a fenced block: no grammar, no fields to fill before the query.
    Sql,
    /// `{"action": "sql" | "clarify" | "decline", ...}` under a JSON-schema grammar.
    Json,
    /// The plain reference prompt's form: its one-line instruction over the schema block,
    /// and a reply of the one field `{"sql": ...}`, begun for the model up to the query
    /// where the provider continues a turn and written whole under a grammar elsewhere (a
    /// follow-up's opens with `understood_as`, and is written whole). Nothing else is
    /// asked of the model: declines come from askdb's rules alone.
    Field,
}

impl ReplyFormat {
    /// The knob's value, as `--strategy` reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplyFormat::Sql => "sql",
            ReplyFormat::Json => "json",
            ReplyFormat::Field => "field",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CardFormat {
    /// CREATE TABLE, then the table's notes and up to three sample values per column as
    /// comments.
    Notes,
    /// CREATE TABLE, then three sample rows (the notes' conventions and glossary still
    /// follow the tables).
    Rows,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemaScope {
    /// The whole schema when it fits the budget, else the linked tables.
    Budget,
    /// Always the linked tables.
    Linked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleWhen {
    /// Every question's first attempt is a vote among sampled candidates.
    Always,
    /// The greedy reply first; candidates only when its result is doubtful.
    Doubt,
}

/// The whole strategy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Strategy {
    pub reply: ReplyFormat,
    pub alias_rule: bool,
    pub decline_marker: bool,
    pub cards: CardFormat,
    pub schema: SchemaScope,
    pub candidates: u32,
    pub sample_when: SampleWhen,
    pub temperature: f32,
    /// With `reply=sql`: the full instruction sentence and dialect paragraph, or the
    /// lean one.
    #[serde(default)]
    pub hints: Hints,
    /// With `when=doubt`: the log-probability of a greedy reply's least likely token
    /// under which its result is doubted (None: confidence is not asked for).
    #[serde(default)]
    pub confidence_floor: Option<f32>,
    /// With `reply=sql`: ask for each group's column beside its value.
    #[serde(default)]
    pub group_columns: bool,
    /// A repair asks for one greedy reply instead of sampled candidates (the default
    /// since decision 0092; recorded without it, a strategy sampled its repairs).
    #[serde(default)]
    pub greedy_repairs: bool,
    /// Seconds a question may take before no further model round starts (None: only the
    /// attempt cap ends it). Runs recorded before the knob had none.
    #[serde(default)]
    pub time_budget_s: Option<u32>,
    /// With `reply=sql`: where a follow-up's instruction is said, and who restates it.
    /// Recorded without it, a strategy asked follow-ups in their message, the default then.
    #[serde(default = "FollowUpAsk::before_the_knob")]
    pub follow_up: FollowUpAsk,
    /// An empty result whose text filter's value another column stores (the value
    /// index says which) is repaired with where it is kept, instead of standing. The
    /// default since decision 0007's addendum; recorded without it, a strategy was off.
    #[serde(default)]
    pub value_lookup: bool,
    /// How verified examples like a first question are shown to the model.
    #[serde(default)]
    pub examples: ExampleForm,
    /// How many verified examples like the question are shown at most (recorded without
    /// it, a strategy showed the default number).
    #[serde(default = "default_examples_shown")]
    pub examples_shown: usize,
    /// The reply form of a first question's first greedy round, where it differs from
    /// `reply` (every later round, and every follow-up, is asked in `reply`'s form).
    #[serde(default)]
    pub first_reply: Option<ReplyFormat>,
}

fn default_examples_shown() -> usize {
    crate::examples::retrieval::PROMPT_EXAMPLES
}

/// How verified examples like the question are shown to the model (decision record 0060).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ExampleForm {
    /// One block in the question's message, the best first, declared as data.
    #[default]
    Block,
    /// Each an exchange before the question: its question as a user message, its SQL as
    /// the model's reply, the best last (nearest the question).
    Turns,
}

/// Where a follow-up is told what to write (one standalone SELECT) and how its
/// restatement ("Understood as: ...") is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FollowUpAsk {
    /// At the end of the follow-up's own message; the reply opens with the restatement.
    Message,
    /// Once in the system prompt (every question's cached prefix); the reply opens with
    /// the restatement.
    System,
    /// Once in the system prompt, and a follow-up's reply begun with the restatement's
    /// marker for the model (where the provider continues a begun reply). The default
    /// (decision record 0011).
    #[default]
    Prefill,
}

impl FollowUpAsk {
    /// What a strategy recorded before the knob was written out asked with.
    fn before_the_knob() -> FollowUpAsk {
        FollowUpAsk::Message
    }
}

/// The default time budget of a question, in seconds: a user waits this long at most for
/// another round (decision record 0009).
pub const DEFAULT_TIME_BUDGET_S: u32 = 30;

/// The largest time budget a strategy may name, in seconds.
pub const MAX_TIME_BUDGET_S: u32 = 600;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Hints {
    /// "join on the keys shown" and the dialect's date functions.
    #[default]
    Full,
    /// "join only the tables the question needs", no dialect paragraph.
    Lean,
    /// The full instruction; the date functions only when the tables hold dates, and a
    /// year stored on its own compared as a number.
    Fit,
}

impl Default for Strategy {
    /// The measured defaults (decision record 0009).
    fn default() -> Self {
        Strategy {
            reply: ReplyFormat::Sql,
            alias_rule: false,
            decline_marker: true,
            cards: CardFormat::Rows,
            schema: SchemaScope::Budget,
            candidates: 5,
            sample_when: SampleWhen::Doubt,
            temperature: 0.7,
            hints: Hints::Full,
            confidence_floor: None,
            group_columns: false,
            greedy_repairs: true,
            time_budget_s: Some(DEFAULT_TIME_BUDGET_S),
            follow_up: FollowUpAsk::Prefill,
            value_lookup: true,
            examples: ExampleForm::Block,
            examples_shown: default_examples_shown(),
            first_reply: None,
        }
    }
}

impl Strategy {
    /// The strategy askdb used before the measured redesign: the JSON action reply, the
    /// alias rule, one candidate. Kept so the ablation can be regenerated.
    pub fn json_actions() -> Strategy {
        Strategy {
            reply: ReplyFormat::Json,
            alias_rule: true,
            candidates: 1,
            ..Strategy::default()
        }
    }

    /// A strategy as a run recorded it (its settings' `strategy`, the [`fmt::Display`]
    /// form). A recording without `follow=` was made before the knob was written out,
    /// when follow-ups were asked in their message, so that is what it reads as; one
    /// without `repair=` sampled its repairs (decision 0092), one without `values=` had
    /// no value lookup (decision 0007); a
    /// `--strategy` typed by a user reads over today's defaults instead ([`FromStr`]).
    pub fn recorded(text: &str) -> Result<Strategy, StrategyError> {
        let strategy =
            format!("follow=message,repair=sampled,values=off,{text}").parse::<Strategy>();
        strategy.map_err(|_| StrategyError(text.to_string()))
    }

    /// The strategy a first question's first greedy round is asked with: this one with
    /// `first_reply`'s form, where one is set.
    pub fn for_first_round(&self) -> Strategy {
        Strategy {
            reply: self.first_reply.unwrap_or(self.reply),
            first_reply: None,
            ..*self
        }
    }

    /// Whether sampled candidates are ever asked for.
    pub fn samples(&self) -> bool {
        self.candidates > 1
    }

    /// Whether a follow-up's instruction is said once in the system prompt rather than
    /// in its message: only a `reply=sql` prompt has the place for it.
    pub fn follow_up_rule_said_in_system(&self) -> bool {
        self.follow_up != FollowUpAsk::Message && self.reply == ReplyFormat::Sql
    }

    /// Whether a follow-up's reply is begun with the restatement's marker.
    pub fn prefills_restatement(&self) -> bool {
        self.follow_up == FollowUpAsk::Prefill && self.reply == ReplyFormat::Sql
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad strategy {0:?}: use key=value pairs separated by commas (reply=sql|json|field, first=same|sql|json|field, alias=on|off, marker=on|off, cards=notes|rows, schema=budget|linked, n=1..8, when=always|doubt, t=0..1.5, hints=full|lean|fit, groups=on|off, repair=sampled|greedy, follow=message|system|prefill, values=on|off, examples=block|turns, budget=off|1..600, conf=off|-10..0)")]
pub struct StrategyError(pub String);

impl FromStr for Strategy {
    type Err = StrategyError;

    /// `reply=sql,n=5,...` over the defaults; `json-actions` names the old strategy.
    fn from_str(text: &str) -> Result<Strategy, StrategyError> {
        let bad = || StrategyError(text.to_string());
        let mut strategy = Strategy::default();
        for part in text
            .split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
        {
            if part == "json-actions" {
                strategy = Strategy::json_actions();
                continue;
            }
            if part == "default" {
                continue;
            }
            let (key, value) = part.split_once('=').ok_or_else(bad)?;
            match (key.trim(), value.trim()) {
                ("reply", "sql") => strategy.reply = ReplyFormat::Sql,
                ("reply", "json") => strategy.reply = ReplyFormat::Json,
                ("reply", "field") => strategy.reply = ReplyFormat::Field,
                ("first", "same") => strategy.first_reply = None,
                ("first", "sql") => strategy.first_reply = Some(ReplyFormat::Sql),
                ("first", "json") => strategy.first_reply = Some(ReplyFormat::Json),
                ("first", "field") => strategy.first_reply = Some(ReplyFormat::Field),
                ("alias", "on") => strategy.alias_rule = true,
                ("alias", "off") => strategy.alias_rule = false,
                ("marker", "on") => strategy.decline_marker = true,
                ("marker", "off") => strategy.decline_marker = false,
                ("cards", "notes") => strategy.cards = CardFormat::Notes,
                ("cards", "rows") => strategy.cards = CardFormat::Rows,
                ("schema", "budget") => strategy.schema = SchemaScope::Budget,
                ("schema", "linked") => strategy.schema = SchemaScope::Linked,
                ("when", "always") => strategy.sample_when = SampleWhen::Always,
                ("when", "doubt") => strategy.sample_when = SampleWhen::Doubt,
                ("hints", "full") => strategy.hints = Hints::Full,
                ("hints", "lean") => strategy.hints = Hints::Lean,
                ("hints", "fit") => strategy.hints = Hints::Fit,
                ("repair", "sampled") => strategy.greedy_repairs = false,
                ("repair", "greedy") => strategy.greedy_repairs = true,
                ("groups", "on") => strategy.group_columns = true,
                ("groups", "off") => strategy.group_columns = false,
                ("follow", "message") => strategy.follow_up = FollowUpAsk::Message,
                ("follow", "system") => strategy.follow_up = FollowUpAsk::System,
                ("follow", "prefill") => strategy.follow_up = FollowUpAsk::Prefill,
                ("values", "on") => strategy.value_lookup = true,
                ("values", "off") => strategy.value_lookup = false,
                ("examples", "block") => strategy.examples = ExampleForm::Block,
                ("examples", "turns") => strategy.examples = ExampleForm::Turns,
                ("ex_n", n) => {
                    strategy.examples_shown = within(n, 1..=MAX_EXAMPLES_SHOWN).ok_or_else(bad)?
                }
                ("budget", "off") => strategy.time_budget_s = None,
                ("budget", seconds) => {
                    strategy.time_budget_s =
                        Some(within(seconds, 1..=MAX_TIME_BUDGET_S).ok_or_else(bad)?)
                }
                ("conf", "off") => strategy.confidence_floor = None,
                ("conf", floor) => {
                    strategy.confidence_floor = Some(within(floor, -10.0..=0.0).ok_or_else(bad)?)
                }
                ("n", n) => strategy.candidates = within(n, 1..=MAX_CANDIDATES).ok_or_else(bad)?,
                ("t", t) => strategy.temperature = within(t, 0.0..=1.5).ok_or_else(bad)?,
                _ => return Err(bad()),
            }
        }
        Ok(strategy)
    }
}

/// A knob's number, when it reads as one and lies in `range`.
fn within<T: FromStr + PartialOrd>(text: &str, range: RangeInclusive<T>) -> Option<T> {
    text.parse::<T>().ok().filter(|value| range.contains(value))
}

impl fmt::Display for Strategy {
    /// The form [`FromStr`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "reply={}{},alias={},marker={},cards={},schema={},n={},when={},t={},hints={}{}{}{}{}{}{}{},budget={}",
            self.reply.as_str(),
            // Written only when set, so strategies recorded before the knob read the same.
            self.first_reply
                .map(|first| format!(",first={}", first.as_str()))
                .unwrap_or_default(),
            if self.alias_rule { "on" } else { "off" },
            if self.decline_marker { "on" } else { "off" },
            match self.cards {
                CardFormat::Notes => "notes",
                CardFormat::Rows => "rows",
            },
            match self.schema {
                SchemaScope::Budget => "budget",
                SchemaScope::Linked => "linked",
            },
            self.candidates,
            match self.sample_when {
                SampleWhen::Always => "always",
                SampleWhen::Doubt => "doubt",
            },
            self.temperature,
            match self.hints {
                Hints::Full => "full",
                Hints::Lean => "lean",
                Hints::Fit => "fit",
            },
            if self.group_columns { ",groups=on" } else { "" },
            // Always written: a recording without it predates the knob (`recorded`).
            match self.follow_up {
                FollowUpAsk::Message => ",follow=message",
                FollowUpAsk::System => ",follow=system",
                FollowUpAsk::Prefill => ",follow=prefill",
            },
            // Always written: a recording without it sampled its repairs (`recorded`).
            if self.greedy_repairs {
                ",repair=greedy"
            } else {
                ",repair=sampled"
            },
            // Written only when set, so strategies recorded before the knob read the same.
            self.confidence_floor
                .map(|floor| format!(",conf={floor}"))
                .unwrap_or_default(),
            // Always written: a recording without it had no value lookup (`recorded`).
            if self.value_lookup {
                ",values=on"
            } else {
                ",values=off"
            },
            // Written only when not the block, so strategies recorded before read the same.
            match self.examples {
                ExampleForm::Block => "",
                ExampleForm::Turns => ",examples=turns",
            },
            // Written only when not the default number, likewise.
            if self.examples_shown == default_examples_shown() {
                String::new()
            } else {
                format!(",ex_n={}", self.examples_shown)
            },
            self.time_budget_s
                .map_or_else(|| "off".to_string(), |seconds| seconds.to_string())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_strategy_reads_as_it_was_asked() {
        // Recorded before `follow=` was written out: follow-ups were asked in their message.
        let before = "reply=sql,alias=off,marker=on,cards=rows,schema=budget,n=5,when=doubt,t=0.7,hints=full,budget=30";
        let recorded = Strategy::recorded(before).expect("reads");
        assert_eq!(recorded.follow_up, FollowUpAsk::Message);
        assert_eq!(
            before.parse::<Strategy>().map(|typed| typed.follow_up),
            Ok(FollowUpAsk::Prefill)
        );
        // Recorded before `repair=` was written out: repairs were sampled.
        assert!(!recorded.greedy_repairs);
        assert_eq!(
            before.parse::<Strategy>().map(|typed| typed.greedy_repairs),
            Ok(true)
        );
        // Written today, every knob reads back, the default included.
        for strategy in [
            Strategy::default(),
            "follow=message".parse().expect("parses"),
            "follow=system,n=1".parse().expect("parses"),
            "values=on".parse().expect("parses"),
            "reply=field".parse().expect("parses"),
            "first=field".parse().expect("parses"),
        ] {
            assert_eq!(Strategy::recorded(&strategy.to_string()), Ok(strategy));
        }
        // A bad recording names itself, not the prefix it was read with.
        assert_eq!(
            Strategy::recorded("n=99"),
            Err(StrategyError("n=99".to_string()))
        );
        // Serialized without the field, as before the knob.
        let mut json = serde_json::to_value(Strategy::default()).expect("serializes");
        json.as_object_mut().expect("an object").remove("follow_up");
        let read: Strategy = serde_json::from_value(json).expect("deserializes");
        assert_eq!(read.follow_up, FollowUpAsk::Message);
        // The value lookup is on by default, was off in recordings that do not name it,
        // and reads back either way.
        assert!(Strategy::default().value_lookup);
        assert!(Strategy::default().to_string().contains(",values=on"));
        assert!(!Strategy::recorded(before).expect("reads").value_lookup);
        let off: Strategy = "values=off".parse().expect("parses");
        assert!(!off.value_lookup && off.to_string().contains(",values=off"));
        assert_eq!(Strategy::recorded(&off.to_string()), Ok(off));
        // Examples are a block unless a strategy says turns, and read back when turns.
        assert_eq!(
            Strategy::recorded(before).map(|s| s.examples),
            Ok(ExampleForm::Block)
        );
        let turns: Strategy = "examples=turns".parse().expect("parses");
        assert_eq!(Strategy::recorded(&turns.to_string()), Ok(turns));
        assert!(!Strategy::default().to_string().contains("examples="));
        // As many examples as retrieval offers unless a strategy says fewer.
        assert_eq!(
            Strategy::recorded(before).map(|s| s.examples_shown),
            Ok(crate::examples::retrieval::PROMPT_EXAMPLES)
        );
        let one: Strategy = "ex_n=1".parse().expect("parses");
        assert_eq!(one.examples_shown, 1);
        assert_eq!(Strategy::recorded(&one.to_string()), Ok(one));
        assert!(!Strategy::default().to_string().contains("ex_n="));
        assert!("ex_n=0".parse::<Strategy>().is_err());
    }

    #[test]
    fn a_strategy_reads_back_what_it_writes_and_refuses_unknown_knobs() {
        let strategy: Strategy =
            "reply=json,alias=on,marker=off,cards=rows,schema=linked,n=3,when=always,t=0.5,hints=lean,conf=-1.5"
                .parse()
                .expect("parses");
        assert_eq!(strategy.to_string().parse::<Strategy>(), Ok(strategy));
        let fitted: Strategy = "hints=fit,groups=on,repair=greedy,follow=system"
            .parse()
            .expect("parses");
        assert_eq!((fitted.hints, fitted.group_columns), (Hints::Fit, true));
        assert_eq!(fitted.follow_up, FollowUpAsk::System);
        assert_eq!(Strategy::default().follow_up, FollowUpAsk::Prefill);
        let prefill: Strategy = "follow=prefill".parse().expect("parses");
        assert!(prefill.prefills_restatement() && prefill.follow_up_rule_said_in_system());
        assert_eq!(prefill.to_string().parse::<Strategy>(), Ok(prefill));
        assert!(!fitted.prefills_restatement());
        assert!(fitted.greedy_repairs);
        assert_eq!(fitted.to_string().parse::<Strategy>(), Ok(fitted));
        assert_eq!(strategy.confidence_floor, Some(-1.5));
        let unhurried: Strategy = "budget=off".parse().expect("parses");
        assert_eq!(unhurried.time_budget_s, None);
        assert_eq!(unhurried.to_string().parse::<Strategy>(), Ok(unhurried));
        assert_eq!(
            "budget=45".parse::<Strategy>().map(|s| s.time_budget_s),
            Ok(Some(45))
        );
        assert_eq!(
            Strategy::default().time_budget_s,
            Some(DEFAULT_TIME_BUDGET_S)
        );
        assert_eq!(
            "conf=off".parse::<Strategy>().map(|s| s.confidence_floor),
            Ok(None)
        );
        assert_eq!(strategy.candidates, 3);
        assert_eq!(strategy.hints, Hints::Lean);
        assert_eq!("".parse::<Strategy>(), Ok(Strategy::default()));
        assert_eq!(
            "json-actions".parse::<Strategy>(),
            Ok(Strategy::json_actions())
        );
        for bad in [
            "reply=xml",
            "n=0",
            "n=9",
            "t=3",
            "fast",
            "alias=maybe",
            "conf=1",
            "conf=x",
            "budget=0",
            "budget=601",
            "budget=soon",
        ] {
            assert!(bad.parse::<Strategy>().is_err(), "{bad}");
        }
    }
}

//! The prompts' words and shapes: what each request holds and in which order.
use super::*;
use crate::agent::conversation::Context;
use crate::agent::strategy::FollowUpAsk;

#[test]
fn every_repaired_database_error_has_an_instruction_and_the_rest_none() {
    for error_type in ErrorType::ALL {
        assert_eq!(
            error_type.repairable(),
            repair_instruction(FailureKind::Database(error_type)).is_some(),
            "{error_type}: repairable types need an instruction, others must have none"
        );
    }
}

#[test]
fn the_system_prompt_leads_with_instructions_and_ends_with_the_schema() {
    let strategy = Strategy::default();
    let prompt = system_prompt(SqlDialect::Sqlite, &strategy, "<schema>x</schema>", true);
    assert!(prompt.starts_with("You write one read-only sqlite SELECT"));
    assert!(prompt.ends_with("<schema>x</schema>"));
    assert!(prompt.contains("strftime"));
    let with_alias = Strategy {
        alias_rule: true,
        ..strategy
    };
    assert!(system_prompt(SqlDialect::Sqlite, &with_alias, "", true).contains(ALIAS_RULE));
    assert!(!prompt.contains(ALIAS_RULE));
    let json = system_prompt(SqlDialect::Postgres, &Strategy::json_actions(), "s", true);
    assert!(json.starts_with("You are askdb."));
    let lean = Strategy {
        hints: Hints::Lean,
        ..strategy
    };
    let lean = system_prompt(SqlDialect::Sqlite, &lean, "", true);
    assert!(lean.contains("join only the tables the question needs"));
    assert!(!lean.contains("strftime") && !lean.contains("join on the keys shown"));
    let fit = Strategy {
        hints: Hints::Fit,
        group_columns: true,
        ..strategy
    };
    let dated = system_prompt(SqlDialect::Sqlite, &fit, "", true);
    let undated = system_prompt(SqlDialect::Sqlite, &fit, "", false);
    assert!(dated.contains("strftime") && dated.contains("holds only a year"));
    assert!(!undated.contains("strftime") && undated.contains("holds only a year"));
    assert!(undated.contains(GROUP_COLUMNS_RULE));
    assert!(!prompt.contains(GROUP_COLUMNS_RULE));
}

#[test]
fn a_repair_keeps_the_first_call_as_its_prefix() {
    let strategy = Strategy::default();
    let first = generation_request(
        &strategy,
        "q",
        "sys".into(),
        Vec::new(),
        Asking::question("Question: q".into()),
        &[],
        false,
    );
    let repair = generation_request(
        &strategy,
        "q",
        "sys".into(),
        Vec::new(),
        Asking::question("Question: q".into()),
        &[RepairTurn {
            reply: "```sql\nSELECT x FROM t".into(),
            feedback: feedback_message(
                FailureKind::Database(ErrorType::UnknownColumn),
                "no such column: x",
                None,
            ),
        }],
        false,
    );
    assert_eq!(first.messages[..], repair.messages[..2]);
    assert_eq!(first.purpose, Purpose::WriteSql);
    assert_eq!(repair.purpose, Purpose::RepairSql);
    assert_eq!(repair.prefill.as_deref(), Some(SQL_FENCE));
    assert_eq!(repair.stop, vec![SQL_STOP.to_string()]);
    assert!(repair.messages[3].content.contains("What to do:"));
}

#[test]
fn a_reply_is_shown_as_written_with_its_block_closed() {
    // The stop sequence cut the closing fence off: it is put back, nothing else.
    assert_eq!(
        closed_reply("```sql\nSELECT 1;\n"),
        "```sql\nSELECT 1;\n```"
    );
    assert_eq!(
        closed_reply("```sql\nSELECT 1\n```"),
        "```sql\nSELECT 1\n```"
    );
    let json = r#"{"action": "sql", "sql": "SELECT 1"}"#;
    assert_eq!(closed_reply(json), json);
}

#[test]
fn the_column_fact_names_the_alias_and_the_owner() {
    let fact = ColumnFact {
        column: "Quantity".into(),
        qualified: Some(("T2".into(), Some("tracks".into()))),
        owners: vec![super::super::repair_facts::Owner {
            table: "invoice_items".into(),
            column: "Quantity".into(),
            known_as: Some("T3".into()),
            join: Vec::new(),
            card: None,
        }],
    };
    let text = column_fact_text(&fact);
    assert!(
        text.contains("T2 stands for tracks, which has no column Quantity"),
        "{text}"
    );
    assert!(text.contains("write T3.Quantity"), "{text}");
}

#[test]
fn a_follow_ups_instruction_is_said_once_where_the_strategy_puts_it() {
    let in_message = Strategy {
        follow_up: FollowUpAsk::Message,
        ..Strategy::default()
    };
    let in_system = Strategy {
        follow_up: FollowUpAsk::System,
        ..Strategy::default()
    };
    let context = Context::default();
    let system_of = |strategy: &Strategy| system_prompt(SqlDialect::Sqlite, strategy, "<s/>", true);
    let message_of =
        |strategy: &Strategy| follow_up_message(strategy, &context, "And in 2024?", &[]);
    assert!(!system_of(&in_message).contains(FOLLOW_UP_RULE));
    assert!(message_of(&in_message).contains("Write one SELECT"));
    assert!(message_of(&in_message).contains(super::super::reply::UNDERSTOOD_MARKER));
    // In the system prompt, the schema still ends it (the cached prefix), and the
    // follow-up's message is only its question.
    let system = system_of(&in_system);
    assert!(system.contains(FOLLOW_UP_RULE), "{system}");
    assert!(
        system.contains(super::super::reply::UNDERSTOOD_MARKER),
        "{system}"
    );
    assert!(system.ends_with("<s/>"));
    assert_eq!(message_of(&in_system), "Follow-up question: And in 2024?");
    // The JSON reply has no such sentence in its system prompt: its message keeps it.
    let json = Strategy {
        reply: ReplyFormat::Json,
        ..in_system
    };
    assert!(message_of(&json).contains("\"understood_as\""));
    // Prefilled: said in the system prompt as with `follow=system`, and the follow-up's
    // first reply begun with the restatement's marker; a first question's and a
    // repair's replies begin with the fence alone.
    let prefill = Strategy {
        follow_up: FollowUpAsk::Prefill,
        ..Strategy::default()
    };
    assert_eq!(system_of(&prefill), system_of(&in_system));
    assert_eq!(message_of(&prefill), "Follow-up question: And in 2024?");
    let earlier = vec![
        Message::user("How many?"),
        Message::assistant("```sql\nSELECT 1\n```"),
    ];
    let repair = RepairTurn {
        reply: "```sql\nSELECT x\n```".to_string(),
        feedback: "no such column: x".to_string(),
    };
    let start = |strategy: &Strategy, earlier: Vec<Message>, repairs: &[RepairTurn], restated| {
        generation_request(
            strategy,
            "q",
            "<s/>".into(),
            earlier,
            Asking::question("q".into()),
            repairs,
            restated,
        )
        .prefill
    };
    let marked = Some(format!(
        "{SQL_FENCE}{}",
        super::super::reply::UNDERSTOOD_MARKER
    ));
    let fence = Some(SQL_FENCE.to_string());
    assert_eq!(start(&prefill, earlier.clone(), &[], false), marked);
    // A repair of a follow-up no reply has restated yet asks again; once read, not.
    let repairs = std::slice::from_ref(&repair);
    assert_eq!(start(&prefill, earlier.clone(), repairs, false), marked);
    assert_eq!(start(&prefill, earlier.clone(), repairs, true), fence);
    assert_eq!(start(&prefill, Vec::new(), &[], false), fence);
    assert_eq!(start(&in_system, earlier.clone(), &[], false), fence);
    let json = Strategy {
        reply: ReplyFormat::Json,
        ..prefill
    };
    assert_eq!(start(&json, earlier, &[], false), None);
}

#[test]
fn the_field_reply_asks_as_the_plain_prompt_does_over_the_agents_schema_and_loop() {
    let field = Strategy {
        reply: ReplyFormat::Field,
        ..Strategy::default()
    };
    let system = system_prompt(SqlDialect::Sqlite, &field, "<schema>x</schema>", true);
    assert_eq!(
        system,
        format!(
            "{}\n\n<schema>x</schema>",
            plain_instruction(SqlDialect::Sqlite)
        )
    );
    // The plain prompt says the same sentence over its own schema.
    let plain = plain_request(SqlDialect::Sqlite, "S", "q");
    assert!(plain.messages[0]
        .content
        .starts_with(&plain_instruction(SqlDialect::Sqlite)));
    let properties = |request: &ModelRequest| -> Vec<String> {
        request.json_schema.as_ref().expect("a grammar")["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .cloned()
            .collect()
    };
    let request = |earlier: Vec<Message>, repairs: &[RepairTurn], restated| {
        generation_request(
            &field,
            "q",
            system.clone(),
            earlier,
            Asking::question("Question: q".into()),
            repairs,
            restated,
        )
    };
    let first = request(Vec::new(), &[], false);
    assert_eq!(properties(&first), ["sql"]);
    assert_eq!(properties(&plain), ["sql"]);
    // Its reply is begun up to the query (the plain prompt's is written whole), and a
    // failed reply shown back opens the same way.
    assert_eq!(
        first.prefill.as_deref(),
        Some(super::super::reply::FIELD_OPENING)
    );
    assert_eq!(plain.prefill, None);
    // A repair continues the same conversation, its failed reply in the field's form.
    let failed = sql_in_reply_form(&field, None, "SELECT \"x\" FROM t");
    assert_eq!(failed, r#"{"sql": "SELECT \"x\" FROM t"}"#);
    assert!(failed.starts_with(super::super::reply::FIELD_OPENING));
    let repair = RepairTurn {
        reply: failed.clone(),
        feedback: "no such column: x".to_string(),
    };
    let repaired = request(Vec::new(), std::slice::from_ref(&repair), false);
    assert_eq!(repaired.messages[..2], first.messages[..]);
    assert_eq!(repaired.messages[2].content, failed);
    // A follow-up not yet restated writes its restatement first, then the SQL.
    let earlier = vec![Message::user("How many?"), Message::assistant(failed)];
    let restating = request(earlier.clone(), &[], false);
    assert_eq!(properties(&restating), ["understood_as", "sql"]);
    assert_eq!(restating.prefill, None);
    assert_eq!(properties(&request(earlier, &[], true)), ["sql"]);
    assert_eq!(
        sql_in_reply_form(&field, Some("the count"), "SELECT 1"),
        r#"{"understood_as": "the count", "sql": "SELECT 1"}"#
    );
    // And the reply reads back as the SQL it holds.
    match crate::agent::reply::parse_reply(r#"{"sql": "SELECT 1"}"#) {
        crate::agent::reply::Reply::Sql { sql, .. } => assert_eq!(sql, "SELECT 1"),
        other => panic!("not read as SQL: {other:?}"),
    }
}

//! `askdb serve`'s policies of live users: an unreadable one stops a server with its own
//! users file, and with shared users is left unloaded so the rest of the team starts.

use super::load_policies;
use crate::users::{UserFile, Users};

const CLERK: &str = "hidden_tables = [\"employees\"]\n";

#[tokio::test]
async fn an_unreadable_policy_stops_a_lone_server_and_is_left_out_with_shared_users() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = UserFile::at(dir.path().join("users.json"));
    file.add("ana", Some("clerk")).expect("ana");
    file.add("ben", Some("laptop")).expect("ben");
    std::fs::create_dir_all(dir.path().join("policies")).expect("policies folder");
    std::fs::write(dir.path().join("policies/clerk.toml"), CLERK).expect("clerk policy");
    let users = Users::from(file);
    let notes = dir.path().join("notes.toml");

    let refused = load_policies(Some(&users), Some(&notes), false)
        .await
        .expect_err("ben's policy file is missing");
    assert!(refused.to_string().contains("laptop.toml"), "{refused}");

    let loaded = load_policies(Some(&users), Some(&notes), true)
        .await
        .expect("the others' policies load");
    assert_eq!(
        loaded.keys().map(String::as_str).collect::<Vec<_>>(),
        ["clerk"]
    );
}

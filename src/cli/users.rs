//! `askdb users add|list|revoke|import`: the users `askdb serve` signs in, in askdb's
//! users file or, with `--state-url`, in the table replicas share (decision 0083); and
//! at `askdb serve`, which of the two the server signs in from and the policies their
//! live users name. The rules of a user are `crate::users`'s; this file picks the store
//! and words the reports.

use std::path::Path;
use std::sync::Arc;

use super::args::UsersCommand;
use super::{CliError, Exit, Output};
use crate::state::users::SharedUsers;
use crate::state::SharedState;
use crate::users::{SignIn, UserFile, Users};

/// Runs one `askdb users` command: on the users file, or on the shared users when
/// `state_url` names the state.
pub async fn run(command: UsersCommand, state_url: Option<&str>) -> Result<Output, CliError> {
    let shared = match state_url {
        Some(url) => Some(shared_users(SharedState::connect(url).await?).await?),
        None => None,
    };
    let users = match &shared {
        Some(shared) => Users::new(Arc::clone(shared) as Arc<dyn crate::users::UserStore>),
        None => Users::from(UserFile::in_data_dir()),
    };
    let everywhere = if shared.is_some() {
        "every askdb serve sharing this state"
    } else {
        "askdb serve"
    };
    match command {
        UsersCommand::Add { name, policy } => {
            let token = users.add(&name, policy.as_deref()).await?;
            Output::new(
                &serde_json::json!({"name": name, "token": token}),
                format!(
                    "{token}\n\nThe token of {name}, shown this once (askdb keeps only its hash). \
                     Send it as Authorization: Bearer TOKEN; {everywhere} now asks every \
                     request but health and the page for one.\n"
                ),
                Exit::Success,
            )
        }
        UsersCommand::List => {
            let users = users.list().await?;
            let text: String = users
                .iter()
                .map(|user| {
                    let policy = user
                        .policy
                        .as_ref()
                        .map(|policy| format!("\tpolicy {policy}"))
                        .unwrap_or_default();
                    match &user.revoked {
                        Some(when) => format!(
                            "{}\tadded {}{policy}\trevoked {when}\n",
                            user.name, user.created
                        ),
                        None => format!("{}\tadded {}{policy}\n", user.name, user.created),
                    }
                })
                .collect();
            let text = if text.is_empty() {
                format!("no users: {everywhere} asks no one for a token\n")
            } else {
                text
            };
            Output::new(&users, text, Exit::Success)
        }
        UsersCommand::Revoke { name } => {
            users.revoke(&name).await?;
            let text = if shared.is_some() {
                format!(
                    "{name}'s token is revoked; every replica refuses it within {} s\n",
                    crate::state::users::USERS_TTL.as_secs()
                )
            } else {
                format!("{name}'s token is revoked\n")
            };
            Output::new(
                &serde_json::json!({"name": name, "revoked": true}),
                text,
                Exit::Success,
            )
        }
        UsersCommand::Import => {
            let Some(shared) = shared else {
                return Err(CliError::Settings(
                    "askdb users import copies this machine's users file into the state \
                     replicas share: give that state with --state-url (ASKDB_STATE_URL)"
                        .to_string(),
                ));
            };
            let file = UserFile::in_data_dir();
            let imported = shared.import(&file.records()?).await?;
            let mut text = format!(
                "{} user(s) copied from {} into the shared state",
                imported.added.len(),
                file.path().display()
            );
            let lists = [
                (
                    &imported.added_revoked,
                    "copied revoked, as the shared state had revoked them",
                ),
                (
                    &imported.revoked_there,
                    "revoked in the shared state, as the file revokes them",
                ),
                (&imported.already_there, "already there, left as they are"),
            ];
            for (names, what) in lists {
                if !names.is_empty() {
                    text.push_str(&format!("; {what}: {}", names.join(", ")));
                }
            }
            text.push('\n');
            Output::new(&imported, text, Exit::Success)
        }
    }
}

/// The users in the shared state, its table found.
async fn shared_users(state: SharedState) -> Result<Arc<SharedUsers>, CliError> {
    Ok(Arc::new(SharedUsers::connect(state).await?))
}

/// The users `askdb serve` signs in and whether they ask for a token: the users file,
/// or with a shared state its table. A replica whose own users file disagrees with the
/// shared table stops here, before it listens: a name the table lacks (the server would
/// serve without a user it was given, and an empty table signs no one in, so it would be
/// open), or a user the file revokes and the table lets in (the revocation would not
/// reach this replica nor any other). `askdb users --state-url URL import` settles both.
pub async fn for_serve(state: Option<&SharedState>) -> Result<(Users, SignIn), CliError> {
    let file = UserFile::in_data_dir();
    let Some(state) = state else {
        let sign_in = file.sign_in()?;
        return Ok((Users::from(file), sign_in));
    };
    let shared = shared_users(state.clone()).await?;
    let users = Users::new(Arc::clone(&shared) as Arc<dyn crate::users::UserStore>);
    let disagreement = crate::state::users::disagreement(&file.list()?, &users.list().await?);
    if let Some(disagreement) = disagreement {
        return Err(CliError::Settings(format!(
            "--state-url: the users are the shared state's, and {} {disagreement}; \
             run `askdb users --state-url URL import` (its tokens keep working and its \
             revocations are carried over), or remove that file",
            file.path().display(),
        )));
    }
    let sign_in = users.sign_in().await?;
    Ok((users, sign_in))
}

/// Every live user's policy, read from its file (decision 0076), by the name the users
/// store keeps. A policy that cannot be read stops `askdb serve` before it listens,
/// unless the users are shared (`shared`): then one user's policy path, perhaps given
/// on another machine, must not keep every replica from starting, so it is a warning
/// on stderr naming the user and the file, and that policy is not loaded. Its users are
/// refused (`server::team`), never served under the notes alone.
pub async fn load_policies(
    users: Option<&Users>,
    notes: Option<&Path>,
    shared: bool,
) -> Result<std::collections::BTreeMap<String, crate::gate::UserPolicy>, CliError> {
    let mut policies = std::collections::BTreeMap::new();
    let Some(users) = users else {
        return Ok(policies);
    };
    // Policy names are read beside the notes file, or in askdb's data directory.
    let beside = notes
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(crate::home::data_dir);
    let mut unreadable = std::collections::BTreeSet::new();
    for user in users.list().await? {
        let Some(policy) = user.policy.filter(|_| user.revoked.is_none()) else {
            continue;
        };
        if policies.contains_key(&policy) || unreadable.contains(&policy) {
            continue;
        }
        let path = crate::users::policy_path(&policy, &beside);
        match crate::gate::UserPolicy::load(&path) {
            Ok(loaded) => {
                policies.insert(policy, loaded);
            }
            Err(error) if shared => {
                eprintln!(
                    "askdb serve: the policy of user {:?} ({}) could not be read, so its \
                     users are refused until a restart finds it: {error}",
                    user.name,
                    path.display()
                );
                unreadable.insert(policy);
            }
            Err(error) => return Err(crate::server::ServeError::from(error).into()),
        }
    }
    Ok(policies)
}

#[cfg(test)]
mod tests;

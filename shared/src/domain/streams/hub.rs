//! The live fan-out of one process (`waymark serve`): broadcast channels per project with live
//! subscribers, one for all its users' messages and one per user that someone follows alone. Publishing never waits: a subscriber that falls [`QUEUE`] messages behind loses
//! its place (tokio's broadcast overwrites the oldest) and is closed with a reason by its
//! connection, which the client resumes from its last id. A project with no subscriber costs
//! publishing one map look-up; on AWS Lambda nobody subscribes here (API Gateway keeps the
//! connections; docs/streams.md).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use tokio::sync::broadcast;

use super::StreamMessage;
use crate::domain::webhooks::outbox::Message;
use crate::error::{ApiError, Kind};

/// How far (in messages of its project) a subscriber may fall behind before it is closed.
pub const QUEUE: usize = 1024;
/// Open streams (SSE connections and WebSocket subscriptions) per project at once.
pub const MAX_PER_PROJECT: usize = 5000;

pub type Receiver = broadcast::Receiver<Arc<StreamMessage>>;

#[derive(Default)]
pub struct Hub {
    projects: Mutex<HashMap<String, Channels>>,
}

/// A project's channels: one for subscriptions that look at every user's messages, one per user
/// for those of one user, so that a message wakes only subscribers that may want it.
#[derive(Default)]
struct Channels {
    all: Option<broadcast::Sender<Arc<StreamMessage>>>,
    users: HashMap<String, broadcast::Sender<Arc<StreamMessage>>>,
    open: usize,
}

/// Which of its project's channels a subscription listens to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Every message of the project (a project's, a group's or a trip's subscription).
    All,
    /// The messages of one user.
    User(String),
}

/// A live subscription: messages of its project as they are committed. Dropping it frees its
/// place in the project's limit.
pub struct Subscription {
    // Dropped before the place, so the place sees whether its channel has receivers left.
    pub rx: Receiver,
    _place: Place,
}

struct Place {
    hub: &'static Hub,
    project_id: String,
    route: Route,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut projects = self.hub.projects.lock().unwrap_or_else(|e| e.into_inner());
        let Some(c) = projects.get_mut(&self.project_id) else { return };
        c.open -= 1;
        match &self.route {
            Route::All if c.all.as_ref().is_some_and(|tx| tx.receiver_count() == 0) => c.all = None,
            Route::User(u) if c.users.get(u).is_some_and(|tx| tx.receiver_count() == 0) => {
                c.users.remove(u);
            }
            _ => {}
        }
        if c.open == 0 {
            projects.remove(&self.project_id);
        }
    }
}

/// The process's hub.
pub fn hub() -> &'static Hub {
    static HUB: LazyLock<Hub> = LazyLock::new(Hub::default);
    &HUB
}

impl Hub {
    /// A subscription to `project_id`'s messages on `route`, or 429 past `max` open ones.
    pub fn subscribe(&'static self, project_id: &str, route: Route, max: usize) -> Result<Subscription, ApiError> {
        let mut projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
        let c = projects.entry(project_id.to_owned()).or_default();
        if c.open >= max {
            return Err(ApiError::new(
                Kind::TooMany,
                format!("streams: a project has at most {max} streams open at once; close one first"),
            ));
        }
        let tx = match &route {
            Route::All => c.all.get_or_insert_with(|| broadcast::channel(QUEUE).0),
            Route::User(u) => c.users.entry(u.clone()).or_insert_with(|| broadcast::channel(QUEUE).0),
        };
        let rx = tx.subscribe();
        c.open += 1;
        Ok(Subscription { rx, _place: Place { hub: self, project_id: project_id.to_owned(), route } })
    }

    /// Hand committed messages to the project's live subscribers (none: one map look-up).
    pub fn publish(&self, project_id: &str, messages: &[Message]) {
        if messages.is_empty() {
            return;
        }
        // In id order, as a resume sends them (a pass lists trip events before fence events).
        let mut sorted: Vec<&Message> = messages.iter().collect();
        sorted.sort_by(|a, b| a.id.cmp(&b.id));
        // The senders are taken under the lock; the messages are made and sent outside it.
        let (all, users) = {
            let projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
            let Some(c) = projects.get(project_id) else { return };
            let users: Vec<(String, broadcast::Sender<Arc<StreamMessage>>)> = sorted
                .iter()
                .filter_map(|m| m.user_id.as_deref())
                .filter_map(|u| c.users.get(u).map(|tx| (u.to_owned(), tx.clone())))
                .collect();
            (c.all.clone(), users)
        };
        for m in sorted {
            let user = m.user_id.as_deref().and_then(|u| users.iter().find(|(id, _)| id == u)).map(|(_, tx)| tx);
            if all.is_none() && user.is_none() {
                continue;
            }
            let m = Arc::new(StreamMessage::of(m));
            // An error only says nobody listens any more. Sending never waits.
            for tx in all.iter().chain(user) {
                let _ = tx.send(m.clone());
            }
        }
    }

    /// Open streams of a project.
    pub fn open(&self, project_id: &str) -> usize {
        self.projects.lock().unwrap_or_else(|e| e.into_inner()).get(project_id).map_or(0, |c| c.open)
    }
}

/// Publish through the process's hub.
pub fn publish(project_id: &str, messages: &[Message]) {
    hub().publish(project_id, messages);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;

    fn message(i: usize) -> Message {
        Message {
            id: format!("{i:024x}"),
            event_type: "location.updated".into(),
            user_id: Some("u".into()),
            body: format!("{{\"id\":\"{i:024x}\"}}"),
            created_at: Timestamp::now(),
            expires_at: None,
            request_id: None,
        }
    }

    #[tokio::test]
    async fn a_subscriber_gets_its_projects_messages_and_a_slow_one_lags_without_blocking() {
        let pid = crate::ids::new_id();
        let mut fast = hub().subscribe(&pid, Route::All, 10).unwrap();
        let mut slow = hub().subscribe(&pid, Route::All, 10).unwrap();
        let other = hub().subscribe(&crate::ids::new_id(), Route::All, 10).unwrap();
        for i in 0..QUEUE + 5 {
            publish(&pid, &[message(i)]);
            assert_eq!(fast.rx.recv().await.unwrap().id, format!("{i:024x}"));
        }
        assert!(matches!(slow.rx.recv().await, Err(broadcast::error::RecvError::Lagged(5))));
        assert!(other.rx.is_empty());
    }

    #[test]
    fn a_project_has_at_most_its_limit_of_streams_and_a_closed_one_frees_its_place() {
        let pid = crate::ids::new_id();
        let a = hub().subscribe(&pid, Route::All, 2).unwrap();
        let _b = hub().subscribe(&pid, Route::All, 2).unwrap();
        let e = hub().subscribe(&pid, Route::All, 2).err().unwrap();
        assert_eq!(e.kind, Kind::TooMany);
        drop(a);
        assert_eq!(hub().open(&pid), 1);
        assert!(hub().subscribe(&pid, Route::All, 2).is_ok());
    }

    #[tokio::test]
    async fn a_users_subscription_hears_that_user_only_and_its_channel_goes_with_it() {
        let pid = crate::ids::new_id();
        let mut all = hub().subscribe(&pid, Route::All, 10).unwrap();
        let mut u = hub().subscribe(&pid, Route::User("u".into()), 10).unwrap();
        let v = hub().subscribe(&pid, Route::User("v".into()), 10).unwrap();
        publish(&pid, &[message(1)]); // user "u"
        assert_eq!(all.rx.recv().await.unwrap().id, format!("{:024x}", 1));
        assert_eq!(u.rx.recv().await.unwrap().id, format!("{:024x}", 1));
        assert!(v.rx.is_empty(), "another user's subscriber is not woken");
        drop(v);
        let users = |pid: &str| hub().projects.lock().unwrap().get(pid).map(|c| c.users.len());
        assert_eq!(users(&pid), Some(1));
        drop((all, u));
        assert_eq!(users(&pid), None, "the project's channels go with its last subscriber");
    }
}

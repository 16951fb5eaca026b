//! The live fan-out of one process (`waymark serve`): a broadcast channel per project with live
//! subscribers. Publishing never waits: a subscriber that falls [`QUEUE`] messages behind loses
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
    projects: Mutex<HashMap<String, Channel>>,
}

struct Channel {
    tx: broadcast::Sender<Arc<StreamMessage>>,
    open: usize,
}

/// A live subscription: messages of its project as they are committed. Dropping it frees its
/// place in the project's limit.
pub struct Subscription {
    pub rx: Receiver,
    _place: Place,
}

struct Place {
    hub: &'static Hub,
    project_id: String,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut projects = self.hub.projects.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = projects.get_mut(&self.project_id) {
            c.open -= 1;
            if c.open == 0 {
                projects.remove(&self.project_id);
            }
        }
    }
}

/// The process's hub.
pub fn hub() -> &'static Hub {
    static HUB: LazyLock<Hub> = LazyLock::new(Hub::default);
    &HUB
}

impl Hub {
    /// A subscription to `project_id`'s messages, or 429 past `max` open ones.
    pub fn subscribe(&'static self, project_id: &str, max: usize) -> Result<Subscription, ApiError> {
        let mut projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
        let c = projects
            .entry(project_id.to_owned())
            .or_insert_with(|| Channel { tx: broadcast::channel(QUEUE).0, open: 0 });
        if c.open >= max {
            return Err(ApiError::new(
                Kind::TooMany,
                format!("streams: a project has at most {max} streams open at once; close one first"),
            ));
        }
        c.open += 1;
        Ok(Subscription { rx: c.tx.subscribe(), _place: Place { hub: self, project_id: project_id.to_owned() } })
    }

    /// Hand committed messages to the project's live subscribers (none: nothing is done).
    pub fn publish(&self, project_id: &str, messages: &[Message]) {
        if messages.is_empty() {
            return;
        }
        let tx = {
            let projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
            match projects.get(project_id) {
                Some(c) => c.tx.clone(),
                None => return,
            }
        };
        // In id order, as a resume sends them (a pass lists trip events before fence events).
        let mut sorted: Vec<&Message> = messages.iter().collect();
        sorted.sort_by(|a, b| a.id.cmp(&b.id));
        for m in sorted {
            // An error only says nobody listens any more.
            let _ = tx.send(Arc::new(StreamMessage::of(m)));
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
        let mut fast = hub().subscribe(&pid, 10).unwrap();
        let mut slow = hub().subscribe(&pid, 10).unwrap();
        let other = hub().subscribe(&crate::ids::new_id(), 10).unwrap();
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
        let a = hub().subscribe(&pid, 2).unwrap();
        let _b = hub().subscribe(&pid, 2).unwrap();
        let e = hub().subscribe(&pid, 2).err().unwrap();
        assert_eq!(e.kind, Kind::TooMany);
        drop(a);
        assert_eq!(hub().open(&pid), 1);
        assert!(hub().subscribe(&pid, 2).is_ok());
    }
}

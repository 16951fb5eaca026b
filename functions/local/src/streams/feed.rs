//! A stream's messages, whatever carries them (SSE or a WebSocket subscription): the stored
//! messages after the client's resume id, then live ones as the processor commits them
//! (`shared::domain::streams::hub`), skipping any id it has just sent. A subscriber that falls
//! [`hub::QUEUE`] messages behind ends with a `lagging` reason and its last id, and resumes from it.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use shared::domain::streams::hub;
use shared::domain::streams::{StreamMessage, resume, tokens};
use shared::error::Kind;
use shared::project::Project;
use shared::store::Store;
use tokio::sync::broadcast::error::RecvError;

use super::{DEDUP, Live, TOKEN_CHECK, TOKEN_IDLE_CHECK};

/// A stream's messages: the stored ones after the resume id, then live ones.
pub struct Feed {
    store: Arc<dyn Store>,
    p: Project,
    live: Live,
    /// The resume cursor while stored messages remain to be read.
    resuming: Option<String>,
    page: VecDeque<StreamMessage>,
    sent: Recent,
    last: Option<String>,
    started: bool,
    done: bool,
    /// The id sent before the last one (where a stream closed before the last one resumes).
    prev: Option<String>,
    /// The stream token it was opened with (checked every [`TOKEN_CHECK`]), if any.
    pub token: Option<String>,
    token_checked: Instant,
}

/// What a feed yields, before a transport frames it.
pub enum Item {
    /// The first frame: the stream is subscribed.
    Open,
    Message(StreamMessage),
    /// The last frame: why the stream ends, and where to resume.
    Closed {
        reason: &'static str,
        message: String,
        last_event_id: Option<String>,
    },
}

impl Feed {
    pub fn new(store: Arc<dyn Store>, p: Project, live: Live, after: Option<String>) -> Self {
        Self {
            store,
            p,
            live,
            last: after.clone(),
            resuming: after,
            page: VecDeque::new(),
            sent: Recent::default(),
            started: false,
            done: false,
            prev: None,
            token: None,
            token_checked: Instant::now(),
        }
    }

    /// Whether the stream's token (if any) still holds, read at most every [`TOKEN_CHECK`].
    async fn token_holds(&mut self) -> bool {
        let Some(t) = &self.token else { return true };
        if self.token_checked.elapsed() < TOKEN_CHECK {
            return true;
        }
        self.token_checked = Instant::now();
        let holds = match tokens::authenticate(self.store.as_ref(), t).await {
            Ok(found) => found.is_some(),
            Err(e) => unknown(e),
        };
        // A trip's token ends with the trip (its page learns the trip is gone).
        match (&self.live.trip_id, holds) {
            (Some(trip), true) => {
                match shared::domain::trips::stream_filter::get_any(self.store.as_ref(), &self.p, trip).await {
                    Ok(_) => true,
                    Err(e) if e.kind == Kind::NotFound => false,
                    Err(e) => unknown(e),
                }
            }
            _ => holds,
        }
    }

    /// The next item, or None when the stream has ended.
    pub async fn next_item(&mut self) -> Option<Item> {
        if self.done {
            return None;
        }
        if !self.started {
            self.started = true;
            return Some(Item::Open);
        }
        loop {
            if let Some(m) = self.page.pop_front() {
                if let Some(m) = self.keep(m) {
                    return Some(self.deliver(m).await);
                }
                continue;
            }
            if let Some(after) = self.resuming.take() {
                match resume::page(self.store.as_ref(), &self.p, &after).await {
                    Ok(page) => {
                        if page.len() == resume::PAGE {
                            self.resuming = page.last().map(|m| m.id.clone());
                        }
                        self.page = page.into();
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e.msg, "stream resume failed");
                        return Some(self.close("error", "the stored events could not be read; reconnect".into()));
                    }
                }
            }
            // A token's stream also checks its token while quiet, so it ends without a message.
            let received = match self.token {
                Some(_) => match tokio::time::timeout(TOKEN_IDLE_CHECK, self.live.sub.rx.recv()).await {
                    Ok(r) => r,
                    Err(_) => {
                        if !self.token_holds().await {
                            return Some(self.close("revoked", REVOKED.into()));
                        }
                        continue;
                    }
                },
                None => self.live.sub.rx.recv().await,
            };
            match received {
                // Every subscriber of the project sees every message: most are filtered here, before
                // anything is copied.
                Ok(m) if !self.live.matcher.matches(&m) => {}
                Ok(m) => {
                    if let Some(m) = self.keep((*m).clone()) {
                        return Some(self.deliver(m).await);
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    return Some(self.close(
                        "lagging",
                        format!(
                            "this stream fell more than {} messages behind ({n} skipped); resume from last_event_id",
                            hub::QUEUE
                        ),
                    ));
                }
                Err(RecvError::Closed) => return Some(self.close("shutdown", "the server is stopping".into())),
            }
        }
    }

    fn keep(&mut self, m: StreamMessage) -> Option<StreamMessage> {
        if !self.live.matcher.matches(&m) || !self.sent.insert(&m.id) {
            return None;
        }
        self.prev = self.last.replace(m.id.clone());
        Some(m)
    }

    /// A message to send, unless the stream's token no longer holds (then the stream closes,
    /// its last id the one before this message).
    async fn deliver(&mut self, m: StreamMessage) -> Item {
        if self.token_holds().await {
            return Item::Message(m);
        }
        self.last = self.prev.take();
        self.close("revoked", REVOKED.into())
    }

    fn close(&mut self, reason: &'static str, message: String) -> Item {
        self.done = true;
        Item::Closed { reason, message, last_event_id: self.last.clone() }
    }
}

const REVOKED: &str = "the stream token was revoked or has expired, or its trip deleted; mint a new one";

/// A check that could not be made: not a refusal (the next one checks again).
fn unknown(e: shared::ApiError) -> bool {
    tracing::warn!(error = %e.msg, "stream token check failed");
    true
}

/// The last [`DEDUP`] ids sent.
#[derive(Default)]
struct Recent {
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl Recent {
    /// Whether `id` is new (then it is remembered).
    fn insert(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        if self.order.len() == DEDUP
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        self.order.push_back(id.to_owned());
        self.set.insert(id.to_owned());
        true
    }
}

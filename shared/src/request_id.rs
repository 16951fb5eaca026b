//! The id of the request an operation serves, so that what it causes later (a processor pass, a
//! webhook message and its delivery attempts) can be followed back to it in the logs. The HTTP
//! edge sets it for the request's task (`http::service`); code below reads it with [`current`]
//! and keeps it where work outlives the request (a webhook message records it).

use std::future::Future;

tokio::task_local! {
    static REQUEST_ID: String;
}

/// Run `work` as part of the request `id`.
pub async fn scope<F: Future>(id: String, work: F) -> F::Output {
    REQUEST_ID.scope(id, work).await
}

/// The id of the request this task serves, if it serves one.
pub fn current() -> Option<String> {
    REQUEST_ID.try_with(Clone::clone).ok()
}

/// Whether `id` may be taken from a client's `x-request-id`: short, and only characters that
/// cannot forge a log line.
pub fn acceptable(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:=".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_id_is_seen_inside_its_scope_only() {
        assert_eq!(current(), None);
        assert_eq!(scope("r-1".into(), async { current() }).await.as_deref(), Some("r-1"));
        assert!(acceptable("8f1c-22aa.b_c:9"));
        assert!(!acceptable("") && !acceptable("a b") && !acceptable("a\nb") && !acceptable(&"x".repeat(65)));
    }
}

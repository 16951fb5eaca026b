//! The one retry policy of every DynamoDB call (the SDK's own retries are off, so that the store
//! knows what each attempt met). docs/architecture.md, "Faults and retries", says it for people.
//!
//! - Throttled (`ProvisionedThroughputExceededException`, `ThrottlingException`,
//!   `RequestLimitExceeded`, a transaction cancelled for `ThrottlingError`): nothing was applied.
//! - Unknown outcome (`InternalServerError`, any 5xx, a timeout, a dropped connection): the call
//!   may have been applied; retried all the same, since every write is conditional or idempotent,
//!   and the caller is told (a conditional write then recognises its own item: `put`, `delete`).
//! - Conflict (a transaction cancelled for `TransactionConflict`): nothing applied; retried on a
//!   budget of its own.
//! - Anything else (a condition, a bad request) ends the call at once.
//!
//! Backoff is exponential with full jitter (AWS's advice): a random pause below
//! `BASE · 2^attempt`, at most `CAP`. A call gives up after `ATTEMPTS` tries or once its pauses
//! would pass `BUDGET`: [`StoreError::Unavailable`] (a 503 with `Retry-After`), or for conflicts
//! [`StoreError::Contended`] (a 409). Each attempt's answer must come within `ATTEMPT_TIMEOUT`.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;

use crate::store::StoreError;

/// Tries of one call that is throttled or meets errors, the first included.
pub(super) const ATTEMPTS: u32 = 8;
/// Tries of one transaction that meets conflicts.
pub(super) const CONFLICT_TRIES: u32 = 10;
/// Most time spent pausing between tries of one call: a request makes a few calls and a Lambda
/// function has 10 s (template.yaml).
pub(super) const BUDGET: Duration = Duration::from_secs(3);
const BASE: Duration = Duration::from_millis(20);
const CAP: Duration = Duration::from_secs(1);
/// Longest wait for one attempt's answer (DynamoDB answers in milliseconds; a query's 1 MB page
/// in tens of them).
pub(super) const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);
/// The same against DynamoDB Local (see `client::timeouts`).
pub(super) const LOCAL_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait to connect.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// What a failed attempt met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    Throttled,
    Unknown,
    Conflict,
    Condition,
    Final,
}

/// The class of an error code (and HTTP status) DynamoDB answered.
pub(super) fn class_of(code: Option<&str>, status: u16) -> Class {
    match code {
        Some(
            "ProvisionedThroughputExceededException"
            | "ThrottlingException"
            | "RequestLimitExceeded"
            | "ThrottlingError"
            | "ProvisionedThroughputExceeded",
        ) => Class::Throttled,
        Some("ConditionalCheckFailedException" | "ConditionalCheckFailed") => Class::Condition,
        Some("TransactionConflict" | "TransactionConflictException") => Class::Conflict,
        // The same client token's transaction is still being applied: ask again.
        Some("InternalServerError" | "ServiceUnavailable" | "TransactionInProgressException") => Class::Unknown,
        _ if status >= 500 => Class::Unknown,
        _ => Class::Final,
    }
}

/// The class of an SDK error; `service` classifies a service error's own detail (a
/// transaction's cancellation reasons) before its code.
pub(super) fn classify<E: ProvideErrorMetadata>(
    e: &SdkError<E, HttpResponse>,
    service: impl Fn(&E) -> Option<Class>,
) -> Class {
    match e {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => Class::Unknown,
        SdkError::ServiceError(s) => {
            service(s.err()).unwrap_or_else(|| class_of(s.err().code(), s.raw().status().as_u16()))
        }
        _ => Class::Final,
    }
}

/// One call's tries so far.
pub(super) struct Tries {
    started: Instant,
    attempts: u32,
    conflicts: u32,
    /// Time paused so far (the budget also counts the tries' own time: `started`).
    paused: Duration,
    /// An attempt ended with an unknown outcome: it may have been applied.
    pub unknown: bool,
}

impl Tries {
    pub fn new() -> Self {
        Self { started: Instant::now(), attempts: 1, conflicts: 0, paused: Duration::ZERO, unknown: false }
    }

    /// After a failed attempt of class `c`: pauses and says true if another may go, false if the
    /// error stands (final, or the budget is spent).
    pub async fn again(&mut self, c: Class) -> bool {
        match self.pause(c) {
            Some(p) => {
                tokio::time::sleep(p).await;
                self.paused += p;
                true
            }
            None => false,
        }
    }

    /// The pause before the next try after a failure of class `c`, counted as a try; None when
    /// the error stands.
    fn pause(&mut self, c: Class) -> Option<Duration> {
        match c {
            Class::Conflict if self.conflicts + 1 < CONFLICT_TRIES => self.conflicts += 1,
            Class::Throttled | Class::Unknown if self.attempts < ATTEMPTS => {
                self.attempts += 1;
                self.unknown |= c == Class::Unknown;
            }
            _ => return None,
        }
        let ceiling = BASE.saturating_mul(1 << (self.attempts + self.conflicts - 1).min(10)).min(CAP);
        let pause = ceiling.mul_f64(rand::random::<f64>());
        (self.started.elapsed().max(self.paused) + pause <= BUDGET).then_some(pause)
    }
}

/// The store's error for an error that stands after the tries.
pub(super) fn failure<E: std::fmt::Debug>(c: Class, e: E) -> StoreError {
    match c {
        Class::Condition => StoreError::ConditionFailed,
        Class::Throttled | Class::Unknown => StoreError::Unavailable(format!("{e:?}")),
        Class::Conflict => StoreError::Contended(format!("{e:?}")),
        Class::Final => StoreError::Backend(format!("{e:?}")),
    }
}

/// Sends `call` (built afresh for each try) under the policy. On failure: the error, its class
/// and whether an earlier try's outcome was unknown.
pub(super) async fn send<T, E, F, Fut>(mut call: F) -> Result<T, Failed<E>>
where
    E: ProvideErrorMetadata,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, SdkError<E, HttpResponse>>>,
{
    let mut tries = Tries::new();
    loop {
        match call().await {
            Ok(v) => return Ok(v),
            Err(e) => {
                let class = classify(&e, |_| None);
                if !tries.again(class).await {
                    return Err(Failed { error: e, class, after_unknown: tries.unknown });
                }
            }
        }
    }
}

/// A call that failed under the policy.
pub(super) struct Failed<E> {
    pub error: SdkError<E, HttpResponse>,
    pub class: Class,
    pub after_unknown: bool,
}

impl<E: std::fmt::Debug> From<Failed<E>> for StoreError {
    fn from(f: Failed<E>) -> Self {
        failure(f.class, f.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_fall_in_their_classes() {
        assert_eq!(class_of(Some("ProvisionedThroughputExceededException"), 400), Class::Throttled);
        assert_eq!(class_of(Some("ThrottlingError"), 400), Class::Throttled);
        assert_eq!(class_of(Some("InternalServerError"), 500), Class::Unknown);
        assert_eq!(class_of(None, 503), Class::Unknown);
        assert_eq!(class_of(Some("ConditionalCheckFailedException"), 400), Class::Condition);
        assert_eq!(class_of(Some("TransactionConflict"), 400), Class::Conflict);
        assert_eq!(class_of(Some("ValidationException"), 400), Class::Final);
    }

    /// Pauses as `Tries::again` would take them, without waiting.
    fn tries_until_spent(c: Class) -> (u32, Tries) {
        let mut t = Tries::new();
        let mut n = 1;
        while let Some(p) = t.pause(c) {
            assert!(p <= CAP);
            t.paused += p;
            n += 1;
        }
        (n, t)
    }

    #[test]
    fn the_budget_ends_retries() {
        let (n, t) = tries_until_spent(Class::Throttled);
        assert!((2..=ATTEMPTS).contains(&n), "{n} tries");
        assert!(t.paused <= BUDGET);
        assert!(!t.unknown);
        let (_, t) = tries_until_spent(Class::Unknown);
        assert!(t.unknown, "an unknown outcome is remembered");
        let (c, _) = tries_until_spent(Class::Conflict);
        assert!((2..=CONFLICT_TRIES).contains(&c), "{c} tries");
        assert_eq!(tries_until_spent(Class::Condition).0, 1, "a failed condition is final");
        assert_eq!(tries_until_spent(Class::Final).0, 1);
    }

    #[test]
    fn spent_budgets_are_503_and_409() {
        assert!(matches!(failure(Class::Throttled, "x"), StoreError::Unavailable(_)));
        assert!(matches!(failure(Class::Unknown, "x"), StoreError::Unavailable(_)));
        assert!(matches!(failure(Class::Conflict, "x"), StoreError::Contended(_)));
        assert!(matches!(failure(Class::Condition, "x"), StoreError::ConditionFailed));
    }
}

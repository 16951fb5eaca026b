//! The error of every operation, as the domain sees it: what went wrong (its [`Kind`]), a message
//! for the person calling the API and the field at fault. Pure: the HTTP edge (`http_error`)
//! maps a kind to a status code and writes the interface's envelopes.

/// What kind of failure, in the caller's terms; `http_error` gives each its status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The input is wrong (400).
    Invalid,
    /// No key, or a key that is not one (401).
    Unauthorized,
    /// A key that may not do this (403).
    Forbidden,
    NotFound,
    MethodNotAllowed,
    /// No answer the request accepts can be sent (406: too large for Lambda unless compressed).
    NotAcceptable,
    /// The request reached no decision in time (408).
    Timeout,
    /// The request conflicts with the current state (409).
    Conflict,
    /// What the request names is no longer kept (410: a stream's resume id past retention).
    Gone,
    /// The body, or a record it would make, is too large (413).
    TooLarge,
    /// Too many requests from this client (429).
    TooMany,
    /// The store stayed throttled or failing through the retry budget: try again later (503,
    /// with `Retry-After`).
    Unavailable,
    /// Our fault; the cause is logged, never sent (500).
    Internal,
}

impl Kind {
    /// The HTTP status code of this kind (`http_error::status` as a number, for transports that
    /// carry it in a body: a WebSocket error frame).
    pub fn http_status(self) -> u16 {
        match self {
            Kind::Invalid => 400,
            Kind::Unauthorized => 401,
            Kind::Forbidden => 403,
            Kind::NotFound => 404,
            Kind::MethodNotAllowed => 405,
            Kind::NotAcceptable => 406,
            Kind::Timeout => 408,
            Kind::Conflict => 409,
            Kind::Gone => 410,
            Kind::TooLarge => 413,
            Kind::TooMany => 429,
            Kind::Internal => 500,
            Kind::Unavailable => 503,
        }
    }
}

/// An error a request can end with. `msg` is written for the person calling the API: it names the
/// field and says what would be accepted. Internal causes are logged, never sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub kind: Kind,
    pub msg: String,
    /// The input at fault, for Roam's error object (kept as data: never read back from `msg`).
    pub field: Option<FieldError>,
}

/// One entry of Roam's error object.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl ApiError {
    pub fn new(kind: Kind, msg: impl Into<String>) -> Self {
        Self { kind, msg: msg.into(), field: None }
    }
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(Kind::Invalid, msg)
    }
    /// Invalid input naming the field: `field: reason`, with the field in Roam's error object.
    pub fn field(field: &str, reason: impl std::fmt::Display) -> Self {
        let message = reason.to_string();
        Self {
            kind: Kind::Invalid,
            msg: format!("{field}: {message}"),
            field: Some(FieldError { field: field.to_owned(), message }),
        }
    }
    pub fn unauthorized(msg: impl Into<String>) -> Self {
        Self::new(Kind::Unauthorized, msg)
    }
    pub fn forbidden(msg: impl Into<String>) -> Self {
        Self::new(Kind::Forbidden, msg)
    }
    pub fn not_found(msg: impl Into<String>) -> Self {
        Self::new(Kind::NotFound, msg)
    }
    pub fn conflict(msg: impl Into<String>) -> Self {
        Self::new(Kind::Conflict, msg)
    }
    /// Internal, with an opaque message; the cause goes to the log only.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(%cause, "internal error");
        Self::new(Kind::Internal, "internal error")
    }
    pub fn is_not_found(&self) -> bool {
        self.kind == Kind::NotFound
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.msg)
    }
}

impl std::error::Error for ApiError {}

//! The pipeline: the only code that calls several domain rooms in one operation. Ingest stores a
//! batch and runs the processor, which derives what the fixes cause in every room (events,
//! trips, stays, webhook messages); erasure removes a user from every room; the retention sweep
//! deletes what a project keeps no longer. Domain rooms compute; this room orchestrates them.

pub mod controls;
pub mod erasure;
pub mod ingest;
pub mod marks;
pub mod processor;
pub mod retention;

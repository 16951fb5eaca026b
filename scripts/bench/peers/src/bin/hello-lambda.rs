//! The smallest `lambda_http` function: the cold-start floor for the function binaries.

use lambda_http::{Body, Error, Request, Response, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    run(service_fn(|_req: Request| async { Ok::<_, Error>(Response::new(Body::from("hello"))) })).await
}

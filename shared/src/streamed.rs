//! Long answers sent while they are written: a summary of 100,000 fixes is 21 MB of JSON, and
//! written whole before the first byte went out, writing (and gzip) and sending took turns.
//! Here an answer's pieces ([`Pieces`]) are written, and gzipped when the client accepts it, on
//! every core at once, and each is sent as soon as it and the ones before it are ready. Through
//! the Lambda adapter the body is collected whole before it is returned, as before.
//!
//! gzip: each piece is compressed on its own as raw deflate that ends on a byte boundary (a sync
//! flush; the last piece ends the stream), and the pieces' CRC-32s are combined: one gzip member,
//! as `pigz` writes it. The status and headers go out before the body is written, so a piece
//! that fails to be written (never seen: the writers write into memory) ends the body early and
//! with an error, which hyper answers by closing the connection before the chunked body's end:
//! a client sees a broken transfer, never a complete-looking document.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use flate2::{Compress, Compression, Crc, FlushCompress, Status};

use crate::body::Pieces;

/// A piece as written: its bytes as sent, and (gzip) the CRC-32 and length of its plain bytes.
type Written = Result<(Vec<u8>, Crc), String>;

/// The gzip header: deflate, no name or time, unknown OS (as flate2's `GzBuilder` writes it).
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// The answer (200, `application/json`) whose body is `pieces` end to end, gzipped when `gzip`.
pub fn answer(pieces: Arc<dyn Pieces>, gzip: bool) -> Response {
    let count = pieces.count();
    let workers = cores().min(count).max(1);
    // Worker `w` writes pieces `w`, `w + workers`, ...: its channel holds the next one written
    // ahead of sending, so memory stays a few pieces whatever the client's pace.
    let receivers: Vec<_> = (0..workers)
        .map(|w| {
            let (tx, rx) = tokio::sync::mpsc::channel::<Written>(1);
            let pieces = pieces.clone();
            tokio::task::spawn_blocking(move || {
                for k in (w..count).step_by(workers) {
                    let written = pieces.piece(k).map_err(|e| e.to_string()).and_then(|plain| {
                        let mut crc = Crc::new();
                        if !gzip {
                            return Ok((plain, crc));
                        }
                        crc.update(&plain);
                        deflate(&plain, k + 1 == count).map(|bytes| (bytes, crc))
                    });
                    // The client went away (the receivers dropped): stop writing.
                    if tx.blocking_send(written).is_err() {
                        return;
                    }
                }
            });
            rx
        })
        .collect();
    struct Sending {
        receivers: Vec<tokio::sync::mpsc::Receiver<Written>>,
        next: usize,
        count: usize,
        crc: Crc,
    }
    let start = Sending { receivers, next: 0, count, crc: Crc::new() };
    let stream = futures::stream::unfold(start, move |mut s| async move {
        if s.next == s.count {
            return None;
        }
        let k = s.next;
        let workers = s.receivers.len();
        let written = match s.receivers[k % workers].recv().await {
            Some(w) => w,
            None => Err("a piece's writer stopped".to_owned()),
        };
        let (bytes, crc) = match written {
            Ok(w) => w,
            Err(e) => {
                tracing::error!(error = %e, piece = k, "writing a long answer failed after its headers were sent");
                // Nothing after the error: the stream ends with it.
                s.next = s.count;
                return Some((Err(std::io::Error::other(e)), s));
            }
        };
        s.next += 1;
        if !gzip {
            return Some((Ok(Bytes::from(bytes)), s));
        }
        s.crc.combine(&crc);
        let mut out = bytes;
        if k == 0 {
            out.splice(0..0, GZIP_HEADER);
        }
        if s.next == s.count {
            out.extend_from_slice(&s.crc.sum().to_le_bytes());
            out.extend_from_slice(&s.crc.amount().to_le_bytes());
        }
        Some((Ok(Bytes::from(out)), s))
    });
    let mut res = Response::new(Body::from_stream(stream));
    *res.status_mut() = StatusCode::OK;
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    // As `crate::http::compress_long` marks what it may compress (and seeing the encoding, it
    // leaves this answer as it is).
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if gzip {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    res
}

/// `plain` as raw deflate at the fastest level (as [`crate::http::compress_long`] compresses),
/// ending on a byte boundary so that the next piece's deflate follows it, or, when `last`,
/// ending the stream.
fn deflate(plain: &[u8], last: bool) -> Result<Vec<u8>, String> {
    let mut c = Compress::new(Compression::fast(), false);
    let mut out = Vec::with_capacity(plain.len() / 6 + 1024);
    let flush = if last { FlushCompress::Finish } else { FlushCompress::Sync };
    loop {
        let read = c.total_in() as usize;
        let status = c.compress_vec(&plain[read..], &mut out, flush).map_err(|e| e.to_string())?;
        // Done once everything is read and the flush had room to complete.
        let room = out.len() < out.capacity();
        match status {
            Status::StreamEnd => return Ok(out),
            Status::Ok | Status::BufError if !last && room && c.total_in() as usize == plain.len() => return Ok(out),
            _ => out.reserve(out.capacity().max(4096)),
        }
    }
}

/// Whether an answer to a request with these headers is gzipped: as
/// [`crate::http::compress_long`] (tower-http) decides, so a long summary is encoded as any
/// long answer is: `gzip` or `x-gzip` with the highest q-value above 0 among it and `identity`
/// (gzip on a tie); other encodings and `*` are not considered; a malformed q-value drops its entry.
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    let (mut gzip, mut identity) = (0u16, 0u16);
    for entry in
        headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).flat_map(|s| s.split(','))
    {
        let mut parts = entry.splitn(2, ';');
        let name = parts.next().unwrap_or("").trim();
        let q = match parts.next() {
            Some(q) => match q_value(q.trim()) {
                Some(q) => q,
                None => continue,
            },
            None => 1000,
        };
        if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
            gzip = gzip.max(q);
        } else if name.eq_ignore_ascii_case("identity") {
            identity = identity.max(q);
        }
    }
    gzip > 0 && gzip >= identity
}

/// `q=0`, `q=1`, `q=0.5`, `q=0.125` (at most three decimals, at most 1) in thousandths.
fn q_value(s: &str) -> Option<u16> {
    let rest = s.strip_prefix('q').or_else(|| s.strip_prefix('Q'))?.strip_prefix('=')?;
    let (int, frac) = rest.split_once('.').unwrap_or((rest, ""));
    let whole: u16 = match int {
        "0" => 0,
        "1" => 1000,
        _ => return None,
    };
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths = frac.bytes().zip([100, 10, 1]).map(|(b, f)| u16::from(b - b'0') * f).sum::<u16>();
    let q = whole + thousandths;
    (q <= 1000).then_some(q)
}

/// The cores an answer's writers may use (read once: the standard library asks the cgroup each time).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::io::Read;

    /// Pieces of known bytes: repetitive JSON-like text, so that deflate has work to do.
    struct Known(Vec<Vec<u8>>);

    impl Pieces for Known {
        fn count(&self) -> usize {
            self.0.len()
        }
        fn piece(&self, k: usize) -> serde_json::Result<Vec<u8>> {
            Ok(self.0[k].clone())
        }
    }

    fn known(count: usize, len: usize) -> Known {
        Known(
            (0..count)
                .map(|k| {
                    (0..len).map(|i| format!("{{\"n\":{},\"k\":{k}}}", i * 7919 % 1013)).collect::<String>().into()
                })
                .collect(),
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pieces_arrive_in_order_plain_and_gzipped() {
        for (count, len) in [(1, 0), (1, 10), (2, 1), (7, 3000), (40, 50)] {
            let pieces = Arc::new(known(count, len));
            let whole = pieces.0.concat();
            let plain = answer(pieces.clone(), false);
            assert!(plain.headers().get(header::CONTENT_ENCODING).is_none());
            let plain = plain.into_body().collect().await.expect("body").to_bytes();
            assert!(plain == whole, "{count} pieces of {len}: plain bytes differ");
            let zipped = answer(pieces, true);
            assert_eq!(zipped.headers()[header::CONTENT_ENCODING], "gzip");
            let zipped = zipped.into_body().collect().await.expect("body").to_bytes();
            // One member: the reader that stops at the first member's end reads it all.
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&zipped[..]).read_to_end(&mut out).expect("valid gzip, CRC and length");
            assert!(out == whole, "{count} pieces of {len}: gzipped bytes differ");
            if whole.len() > 100_000 {
                assert!(zipped.len() * 4 < whole.len(), "{} of {}", zipped.len(), whole.len());
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_gone_mid_answer_leaves_no_writer_waiting() {
        let pieces = Arc::new(known(200, 3000));
        let mut body = answer(pieces.clone(), true).into_body();
        let first = body.frame().await.expect("a frame").expect("no error");
        assert!(first.is_data());
        drop(body);
        // The writers hold the pieces while they write; a writer waiting on a reader that is gone
        // would hold them for ever.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while Arc::strong_count(&pieces) > 1 {
            assert!(std::time::Instant::now() < deadline, "the writers kept writing for no one");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    struct Failing;

    impl Pieces for Failing {
        fn count(&self) -> usize {
            3
        }
        fn piece(&self, k: usize) -> serde_json::Result<Vec<u8>> {
            if k == 1 { Err(serde::ser::Error::custom("no")) } else { Ok(b"x".to_vec()) }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_piece_that_fails_breaks_the_body() {
        for gzip in [false, true] {
            let body = answer(Arc::new(Failing), gzip).into_body();
            assert!(body.collect().await.is_err(), "gzip {gzip}: the body ends in an error, not as a whole");
        }
    }

    #[test]
    fn gzip_is_chosen_as_tower_http_chooses_it() {
        let with = |v: &[&str]| {
            let mut h = HeaderMap::new();
            for v in v {
                h.append(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
            }
            accepts_gzip(&h)
        };
        for yes in [&["gzip"][..], &["gzip, deflate, br"], &["br", "GZIP;q=0.5"], &["x-gzip"], &["identity, gzip"]] {
            assert!(with(yes), "{yes:?}");
        }
        for no in [
            &[][..],
            &["identity"],
            &["gzip;q=0"],
            &["gzip;q=0.000"],
            &["*"],
            &["br, deflate"],
            &["gzip;q=0.5, identity"],
            &["gzip;q=1.5"],
            &["gzip;q=0.1234"],
            &["gzip;x"],
        ] {
            assert!(!with(no), "{no:?}");
        }
    }
}

//! `openloop`: an open-loop HTTP/1.1 load generator for `bench/load.sh`.
//!
//! `wrk` is closed-loop: a slow response delays the next request on its
//! connection, so the requests that would have met a stall are never sent and
//! the stall never shows in the percentiles ("coordinated omission"). Here every
//! request has an *intended* send time on a fixed schedule (`--rate` per second
//! spread over `--connections` keep-alive connections), and its latency is
//! measured from that intended time, so a stall counts for every request it
//! delays. Debian ships no `wrk2`, which does the same; this is small enough to
//! own.
//!
//! Timer wheels tick in milliseconds, which would add up to a millisecond of
//! scheduling slack to every figure; the last stretch before a send is spent
//! yielding instead (the generator runs pinned to its own core, so spinning
//! costs the server nothing).
//!
//! ```text
//! openloop URL --rate N [--duration SECS] [--connections C] [--warmup SECS]
//!          [-H 'Name: value']... [--method M] [--body-file F]
//! ```
//!
//! Prints a human summary, and a last line `openloop rate=.. sent=.. errors=..
//! p50_us=.. p90_us=.. p99_us=.. p999_us=.. max_us=.. mean_us=..` for scripts. A response
//! counts as an error unless its status is 2xx or 304.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Args {
    host: String,
    port: u16,
    path: String,
    rate: f64,
    duration: Duration,
    warmup: Duration,
    connections: usize,
    headers: Vec<String>,
    method: String,
    body: Vec<u8>,
}

fn usage(msg: &str) -> ! {
    eprintln!("openloop: {msg}");
    eprintln!(
        "usage: openloop URL --rate N [--duration SECS] [--connections C] [--warmup SECS] \
         [-H 'Name: value']... [--method M] [--body-file F]"
    );
    std::process::exit(2);
}

fn parse_args() -> Args {
    let mut it = std::env::args().skip(1);
    let mut url = None;
    let mut rate = None;
    let mut duration: f64 = 10.0;
    let mut warmup = 2.0;
    let mut connections = 32usize;
    let mut headers = Vec::new();
    let mut method = None;
    let mut body = Vec::new();
    while let Some(a) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .unwrap_or_else(|| usage(&format!("{name} needs a value")))
        };
        match a.as_str() {
            "--rate" => {
                rate = Some(
                    val("--rate")
                        .parse::<f64>()
                        .unwrap_or_else(|_| usage("bad --rate")),
                )
            }
            "--duration" => {
                duration = val("--duration")
                    .parse()
                    .unwrap_or_else(|_| usage("bad --duration"))
            }
            "--warmup" => {
                warmup = val("--warmup")
                    .parse()
                    .unwrap_or_else(|_| usage("bad --warmup"))
            }
            "--connections" => {
                connections = val("--connections")
                    .parse()
                    .unwrap_or_else(|_| usage("bad --connections"))
            }
            "-H" => headers.push(val("-H")),
            "--method" => method = Some(val("--method")),
            "--body-file" => {
                let f = val("--body-file");
                body = std::fs::read(&f).unwrap_or_else(|e| usage(&format!("{f}: {e}")));
            }
            _ if url.is_none() && !a.starts_with('-') => url = Some(a),
            _ => usage(&format!("unknown argument {a}")),
        }
    }
    let url = url.unwrap_or_else(|| usage("URL is required"));
    let rate = rate.unwrap_or_else(|| usage("--rate is required"));
    if rate.is_nan()
        || rate <= 0.0
        || connections == 0
        || duration.is_nan()
        || duration <= 0.0
        || warmup < 0.0
    {
        usage("rate, connections and duration must be positive");
    }
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| usage("only http:// URLs"));
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (
            h.to_string(),
            p.parse().unwrap_or_else(|_| usage("bad port")),
        ),
        None => (authority.to_string(), 80),
    };
    let method = method.unwrap_or_else(|| {
        if body.is_empty() {
            "GET".into()
        } else {
            "POST".into()
        }
    });
    Args {
        host,
        port,
        path,
        rate,
        duration: Duration::from_secs_f64(duration),
        warmup: Duration::from_secs_f64(warmup),
        connections,
        headers,
        method,
        body,
    }
}

fn request_bytes(a: &Args) -> Vec<u8> {
    let mut r = format!(
        "{} {} HTTP/1.1\r\nHost: {}:{}\r\n",
        a.method, a.path, a.host, a.port
    );
    for h in &a.headers {
        r.push_str(h);
        r.push_str("\r\n");
    }
    if !a.body.is_empty() || a.method != "GET" {
        r.push_str(&format!("Content-Length: {}\r\n", a.body.len()));
    }
    r.push_str("\r\n");
    let mut bytes = r.into_bytes();
    bytes.extend_from_slice(&a.body);
    bytes
}

/// Reads one response off `stream`, keeping any bytes of the next one in
/// `buf`. Returns the status code.
async fn read_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<u16> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        fill(stream, buf).await?;
    };
    let head = std::str::from_utf8(&buf[..head_end]).map_err(|_| bad("non-UTF-8 head"))?;
    let status: u16 = head
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let mut length = 0usize;
    let mut chunked = false;
    for line in head.split("\r\n").skip(1) {
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().map_err(|_| bad("bad content-length"))?;
            } else if k.eq_ignore_ascii_case("transfer-encoding")
                && v.to_ascii_lowercase().contains("chunked")
            {
                chunked = true;
            }
        }
    }
    buf.drain(..head_end);
    if status == 304 || status == 204 {
        return Ok(status);
    }
    if !chunked {
        while buf.len() < length {
            fill(stream, buf).await?;
        }
        buf.drain(..length);
        return Ok(status);
    }
    loop {
        let line_end = loop {
            if let Some(i) = find(buf, b"\r\n") {
                break i;
            }
            fill(stream, buf).await?;
        };
        let size_text = std::str::from_utf8(&buf[..line_end]).map_err(|_| bad("bad chunk size"))?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| bad("bad chunk size"))?;
        let need = line_end + 2 + size + 2;
        while buf.len() < need {
            fill(stream, buf).await?;
        }
        buf.drain(..need);
        if size == 0 {
            return Ok(status);
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let mut chunk = [0u8; 16 * 1024];
    let n = stream.read(&mut chunk).await?;
    if n == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

/// Waits until `at`: sleeps while more than a timer tick away, then yields.
async fn wait_until(at: Instant) {
    loop {
        let now = Instant::now();
        if now >= at {
            return;
        }
        let left = at - now;
        if left > Duration::from_micros(1500) {
            tokio::time::sleep(left - Duration::from_millis(1)).await;
        } else {
            tokio::task::yield_now().await;
        }
    }
}

struct Outcome {
    latencies_us: Vec<u32>,
    sent: u64,
    errors: u64,
}

async fn connection(
    addr: (String, u16),
    request: std::sync::Arc<Vec<u8>>,
    start: Instant,
    measure_from: Instant,
    end: Instant,
    interval: Duration,
) -> Outcome {
    let mut out = Outcome {
        latencies_us: Vec::new(),
        sent: 0,
        errors: 0,
    };
    let mut stream = match TcpStream::connect((addr.0.as_str(), addr.1)).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("openloop: connect: {e}");
            out.errors += 1;
            return out;
        }
    };
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::with_capacity(32 * 1024);
    let mut k: u32 = 0;
    loop {
        let intended = start + interval * k;
        k += 1;
        if intended >= end {
            return out;
        }
        wait_until(intended).await;
        let result = async {
            stream.write_all(&request).await?;
            read_response(&mut stream, &mut buf).await
        }
        .await;
        let done = Instant::now();
        if intended < measure_from {
            continue;
        }
        out.sent += 1;
        match result {
            Ok(status) if (200..300).contains(&status) || status == 304 => {
                let us = (done - intended).as_micros().min(u32::MAX as u128) as u32;
                out.latencies_us.push(us);
            }
            Ok(status) => {
                if out.errors == 0 {
                    eprintln!("openloop: status {status}");
                }
                out.errors += 1;
            }
            Err(e) => {
                eprintln!("openloop: {e}");
                out.errors += 1;
                return out;
            }
        }
    }
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[i.clamp(1, sorted.len()) - 1]
}

fn main() {
    let args = parse_args();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let request = std::sync::Arc::new(request_bytes(&args));
        // Each connection sends every `interval`; connections are staggered
        // evenly, so the whole schedule is one request every 1/rate seconds.
        let interval = Duration::from_secs_f64(args.connections as f64 / args.rate);
        let t0 = Instant::now() + Duration::from_millis(200);
        let measure_from = t0 + args.warmup;
        let end = measure_from + args.duration;
        let mut tasks = Vec::with_capacity(args.connections);
        for i in 0..args.connections {
            let start = t0 + interval.mul_f64(i as f64 / args.connections as f64);
            tasks.push(tokio::spawn(connection(
                (args.host.clone(), args.port),
                request.clone(),
                start,
                measure_from,
                end,
                interval,
            )));
        }
        let mut all = Vec::new();
        let (mut sent, mut errors) = (0u64, 0u64);
        for t in tasks {
            let o = t.await.expect("connection task");
            all.extend(o.latencies_us);
            sent += o.sent;
            errors += o.errors;
        }
        all.sort_unstable();
        let secs = args.duration.as_secs_f64();
        let achieved = sent as f64 / secs;
        let (p50, p90, p99, p999) =
            (percentile(&all, 50.0), percentile(&all, 90.0), percentile(&all, 99.0), percentile(&all, 99.9));
        let max = all.last().copied().unwrap_or(0);
        let mean = if all.is_empty() {
            0
        } else {
            all.iter().map(|&u| u64::from(u)).sum::<u64>() / all.len() as u64
        };
        println!(
            "open loop: target {:.0} req/s over {} connections, achieved {achieved:.0} req/s, {errors} errors",
            args.rate, args.connections
        );
        println!(
            "latency from the intended send time: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms, max {:.3} ms",
            p50 as f64 / 1000.0,
            p90 as f64 / 1000.0,
            p99 as f64 / 1000.0,
            p999 as f64 / 1000.0,
            max as f64 / 1000.0
        );
        println!(
            "openloop rate={achieved:.0} sent={sent} errors={errors} p50_us={p50} p90_us={p90} p99_us={p99} p999_us={p999} max_us={max} mean_us={mean}"
        );
        if errors > 0 {
            std::process::exit(1);
        }
    });
}

//! The clock behind the header read timeout: one tokio timer per
//! connection instead of one per request.
//!
//! hyper bounds the reading of every request head with a timer it asks of
//! [`hyper::rt::Timer`]: a fresh `sleep_until(now + timeout)` each time it
//! starts reading a head, dropped as soon as the head is parsed. With
//! hyper-util's `TokioTimer` each of those is a tokio `Sleep` registered in
//! the runtime's timer wheel when first polled and removed again when
//! dropped: two trips through the wheel's lock for every request on a
//! kept-alive connection (about 1,500 instructions of a 23,000-instruction
//! `GET /healthz`, measured with callgrind).
//!
//! [`ConnTimer`] gives each connection a single tokio timer (its *alarm*).
//! The sleeps hyper gets only carry their deadline; polling one polls the
//! alarm, and the alarm is moved only when it fires before the deadline of
//! the sleep being polled. A connection's deadlines only grow (each is
//! "now + timeout" for the next head), so between two firings of the alarm
//! no request touches the wheel; the alarm fires at most once per timeout
//! period, and each firing either ends the connection (its head is late:
//! exactly the deadline hyper asked for) or moves the alarm to the newest
//! deadline. The timeout itself is not coarsened.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};

/// A [`Timer`] for one connection (build one per accepted connection).
#[derive(Clone, Default)]
pub struct ConnTimer {
    alarm: Arc<Mutex<Alarm>>,
}

impl ConnTimer {
    /// A timer whose alarm is armed the first time a sleep is polled.
    pub fn new() -> ConnTimer {
        ConnTimer::default()
    }
}

/// The connection's one tokio timer and the deadline it is armed for.
#[derive(Default)]
struct Alarm {
    armed: Option<(Instant, Pin<Box<tokio::time::Sleep>>)>,
}

/// What hyper holds: a deadline on the connection's alarm.
struct Deadline {
    alarm: Arc<Mutex<Alarm>>,
    at: Instant,
}

impl Timer for ConnTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(Instant::now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        Box::pin(Deadline {
            alarm: self.alarm.clone(),
            at: deadline,
        })
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<Deadline>() {
            Some(mut d) => d.at = new_deadline,
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

impl Sleep for Deadline {}

impl Future for Deadline {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let at = self.at;
        let mut alarm = self.alarm.lock().unwrap_or_else(PoisonError::into_inner);
        let (armed, sleep) = alarm.armed.get_or_insert_with(|| {
            (
                at,
                Box::pin(tokio::time::sleep_until(tokio::time::Instant::from_std(at))),
            )
        });
        if *armed > at {
            // Armed for a later deadline than this one (an older sleep
            // polled after a newer one): bring it forward.
            *armed = at;
            sleep.as_mut().reset(tokio::time::Instant::from_std(at));
        }
        loop {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if *armed >= at {
                // Fired at (or after) this deadline.
                return Poll::Ready(());
            }
            // Fired for an earlier head that was read in time: move the
            // alarm to this deadline (the only trip through the wheel).
            *armed = at;
            sleep.as_mut().reset(tokio::time::Instant::from_std(at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll_once(s: &mut Pin<Box<dyn Sleep>>) -> Poll<()> {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        s.as_mut().poll(&mut cx)
    }

    #[tokio::test(start_paused = true)]
    async fn a_sleep_ends_at_its_deadline_not_before() {
        let timer = ConnTimer::new();
        let start = tokio::time::Instant::now().into_std();
        let mut s = timer.sleep_until(start + Duration::from_secs(10));
        assert!(poll_once(&mut s).is_pending());
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(poll_once(&mut s).is_pending());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(poll_once(&mut s).is_ready());
    }

    #[tokio::test(start_paused = true)]
    async fn a_later_sleep_outlives_the_alarm_of_an_earlier_one() {
        let timer = ConnTimer::new();
        let t0 = tokio::time::Instant::now().into_std();
        // The first head, read in time: its sleep armed the alarm at t0+10.
        let mut first = timer.sleep_until(t0 + Duration::from_secs(10));
        assert!(poll_once(&mut first).is_pending());
        drop(first);
        // The next head starts at t0+5, deadline t0+15.
        tokio::time::advance(Duration::from_secs(5)).await;
        let mut second = timer.sleep_until(t0 + Duration::from_secs(15));
        assert!(poll_once(&mut second).is_pending());
        // Past the first deadline, not the second: the alarm fires and moves.
        tokio::time::advance(Duration::from_secs(6)).await;
        assert!(poll_once(&mut second).is_pending());
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(poll_once(&mut second).is_ready());
    }

    #[tokio::test(start_paused = true)]
    async fn reset_moves_the_deadline_and_an_earlier_one_pulls_the_alarm_forward() {
        let timer = ConnTimer::new();
        let t0 = tokio::time::Instant::now().into_std();
        let mut s = timer.sleep_until(t0 + Duration::from_secs(30));
        assert!(poll_once(&mut s).is_pending());
        timer.reset(&mut s, t0 + Duration::from_secs(2));
        assert!(poll_once(&mut s).is_pending());
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(
            poll_once(&mut s).is_ready(),
            "the alarm was brought forward"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_alarm_wakes_the_connection_task() {
        let timer = ConnTimer::new();
        let t0 = tokio::time::Instant::now().into_std();
        let s = timer.sleep_until(t0 + Duration::from_secs(1));
        // Awaiting it completes only through a wake-up from the alarm.
        tokio::time::timeout(Duration::from_secs(5), s)
            .await
            .expect("the sleep ended");
        assert!(tokio::time::Instant::now().into_std() >= t0 + Duration::from_secs(1));
    }
}

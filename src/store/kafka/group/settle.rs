//! Retries while a group coordinator settles. For some seconds after a broker starts, or after a
//! partition of `__consumer_offsets` moves, its coordinator answers `COORDINATOR_LOAD_IN_PROGRESS`
//! (or names no coordinator, or another one). librdkafka retries that for a consumer's own group
//! requests, but hands it back from ListGroups and from the admin calls on groups.

use std::time::{Duration, Instant};

use rdkafka::error::RDKafkaErrorCode;

/// True for a coordinator that is loading its groups, unknown yet, or moved: the same request
/// succeeds once it settles.
pub(super) fn is_settling(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::CoordinatorLoadInProgress
            | RDKafkaErrorCode::CoordinatorNotAvailable
            | RDKafkaErrorCode::NotCoordinator
    )
}

/// Runs `op` again while `settling` says its answer came from an unsettled coordinator, pausing
/// 50 ms, then twice as long each time up to 1 s, until `within` has passed; then the last answer
/// stands (its error names the code). Only for requests that are safe to repeat.
pub(super) fn until_settled<R>(
    within: Duration,
    mut op: impl FnMut() -> R,
    settling: impl Fn(&R) -> bool,
) -> R {
    let deadline = Instant::now() + within;
    let mut pause = Duration::from_millis(50);
    loop {
        let answer = op();
        if !settling(&answer) || Instant::now() + pause >= deadline {
            return answer;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn settling(r: &Result<u32, RDKafkaErrorCode>) -> bool {
        matches!(r, Err(c) if is_settling(*c))
    }

    #[test]
    fn a_loading_coordinator_is_asked_again_until_it_answers() {
        let calls = Cell::new(0);
        let answer = until_settled(
            Duration::from_secs(30),
            || {
                calls.set(calls.get() + 1);
                match calls.get() {
                    1 => Err(RDKafkaErrorCode::CoordinatorLoadInProgress),
                    2 => Err(RDKafkaErrorCode::NotCoordinator),
                    3 => Err(RDKafkaErrorCode::CoordinatorNotAvailable),
                    _ => Ok(7),
                }
            },
            settling,
        );
        assert_eq!((answer, calls.get()), (Ok(7), 4));
    }

    #[test]
    fn any_other_answer_is_final_at_once() {
        for code in [
            RDKafkaErrorCode::GroupIdNotFound,
            RDKafkaErrorCode::NonEmptyGroup,
            RDKafkaErrorCode::GroupAuthorizationFailed,
        ] {
            let calls = Cell::new(0);
            let answer = until_settled(
                Duration::from_secs(30),
                || {
                    calls.set(calls.get() + 1);
                    Err(code)
                },
                settling,
            );
            assert_eq!((answer, calls.get()), (Err(code), 1), "{code:?}");
        }
    }

    #[test]
    fn a_coordinator_that_never_settles_gets_its_error_back() {
        let calls = Cell::new(0);
        let answer = until_settled(
            Duration::from_millis(400),
            || {
                calls.set(calls.get() + 1);
                Err(RDKafkaErrorCode::CoordinatorLoadInProgress)
            },
            settling,
        );
        assert_eq!(answer, Err(RDKafkaErrorCode::CoordinatorLoadInProgress));
        assert!(calls.get() >= 2, "asked {} times", calls.get());
    }
}

//! Live-traffic A/B interception: which foreground asks are A/B'd (seed: SkillOpt, "Live-traffic
//! A/B interception (off by default, #482)"; S-69..S-74).

/// Why an ask was not intercepted, or that it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interception {
    /// `live_ab_sample_rate` is 0 (the default): the ask path is untouched (S-70).
    Off,
    /// The champion arm has fewer than `bandit_min_samples` pulls (S-69, S-71).
    BelowFloor,
    /// Not sampled this time.
    NotSampled,
    /// A/B this ask.
    Intercept,
}

/// Decides one ask (S-71): rate ≤ 0 ⇒ [`Interception::Off`] without looking at anything else;
/// champion pulls < `min_samples` ⇒ [`Interception::BelowFloor`]; else intercept when the
/// uniform draw `u` in [0,1) is below `rate` (rate ≥ 1 always intercepts).
pub fn decide(rate: f64, champion_pulls: u64, min_samples: u64, u: f64) -> Interception {
    if rate.is_nan() || rate <= 0.0 {
        return Interception::Off;
    }
    if champion_pulls < min_samples {
        return Interception::BelowFloor;
    }
    if u < rate {
        Interception::Intercept
    } else {
        Interception::NotSampled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // S-70
    #[test]
    fn s70_rate_zero_is_off_whatever_the_arms() {
        assert_eq!(decide(0.0, 1_000, 30, 0.0), Interception::Off);
        assert_eq!(decide(f64::NAN, 1_000, 30, 0.0), Interception::Off);
    }

    // S-71
    #[test]
    fn s71_only_champions_at_the_floor_are_sampled() {
        assert_eq!(decide(1.0, 29, 30, 0.0), Interception::BelowFloor);
        assert_eq!(decide(1.0, 30, 30, 0.999), Interception::Intercept);
        assert_eq!(decide(0.25, 30, 30, 0.2), Interception::Intercept);
        assert_eq!(decide(0.25, 30, 30, 0.3), Interception::NotSampled);
        let hits = (0..1000)
            .filter(|i| decide(0.1, 30, 30, f64::from(*i) / 1000.0) == Interception::Intercept)
            .count();
        assert_eq!(hits, 100);
    }
}

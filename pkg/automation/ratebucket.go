package automation

import (
	"math"
	"time"
)

// The shared RateBuckets of the stores (DynamoDB items, PostgreSQL rows)
// keep one number per bucket, the generic cell rate algorithm's
// "theoretical arrival time" (tat, microseconds since the epoch): a token
// is there when tat <= now + (burst-1)·interval, and taking it moves tat to
// max(tat, now) + interval. The arithmetic is here once, so that every
// store reads a bucket the same way.

// BucketInterval is the microseconds one token of a bucket refilled rate
// tokens a second takes to come back, and the tolerance: how far past now
// tat may be for a token to be there (burst-1 intervals).
func BucketInterval(rate float64, burst int64) (interval, tolerance int64) {
	interval = int64(math.Ceil(1e6 / rate))
	return interval, (max(burst, 1) - 1) * interval
}

// BucketLevel reads a bucket whose tat is tat at now (both in
// microseconds since the epoch): the tokens in use (0 to burst) and how
// long until one is there.
func BucketLevel(tat, now int64, rate float64, burst int64) (inUse int64, wait time.Duration) {
	interval, tolerance := BucketInterval(rate, burst)
	if tat <= now {
		return 0, 0
	}
	inUse = min((tat-now+interval-1)/interval, max(burst, 1))
	if tat > now+tolerance {
		wait = time.Duration(tat-tolerance-now) * time.Microsecond
	}
	return inUse, wait
}

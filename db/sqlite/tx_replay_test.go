package sqlite

import (
	"strings"
	"testing"
)

// ExpectReplayOutcomes finds the pairs not noted yet by replay_outcomes'
// key (db's TestExpectReplayOutcomesCountsEachPairOnce checks what it
// counts, on both stores).
func TestExpectReplayOutcomesCountsByTheKey(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	const job = 7
	plan := queryPlan(t, d, countNewOutcomesSQL, job, `[[1,100],[2,100]]`)
	if !strings.Contains(plan, "SEARCH o USING PRIMARY KEY (copy_seq=? AND group_id=?)") {
		t.Errorf("plan of the count:\n%s", plan)
	}
}

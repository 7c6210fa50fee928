package web

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lazarus-dlq/lazarus/broker"
)

// metricErrorGroups is how many error groups per queue /metrics exposes:
// the biggest, summed over the consumer groups. Each is a time series of
// its own (the fingerprint is a label), and a queue whose errors carry
// what the fingerprint does not mask can have as many groups as dead
// letters: the bound keeps the label cardinality at this many series per
// queue whatever happens, and the overview and the list show the rest.
const metricErrorGroups = 10

var descErrorGroup = prometheus.NewDesc("lazarus_error_group_dead_letters",
	"Dead letters waiting in an error group (fingerprint of their error), summed over the consumer groups; the 10 biggest groups of each queue only.",
	[]string{"queue", "fingerprint"}, nil)

// errorGroupCollector reads the biggest error groups at each scrape, from
// their kept counts.
type errorGroupCollector struct{ b *broker.Broker }

func (errorGroupCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descErrorGroup }

func (ec errorGroupCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	groups, err := ec.b.TopErrorGroups(ctx, metricErrorGroups)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descErrorGroup, err)
		return
	}
	for queue, gs := range groups {
		for _, g := range gs {
			ch <- prometheus.MustNewConstMetric(descErrorGroup, prometheus.GaugeValue, float64(g.DeadLetters), queue, g.Fingerprint)
		}
	}
}

var (
	descGroupsOpen = prometheus.NewDesc("lazarus_error_groups_open",
		"Error groups of the queue that are open (new, or back), over its consumer groups; regressed ones included.",
		[]string{"queue"}, nil)
	descGroupsRegressed = prometheus.NewDesc("lazarus_error_groups_regressed",
		"Error groups of the queue that are open again after they were resolved (regressed).",
		[]string{"queue"}, nil)
)

// groupStateCollector reads how many error groups of each queue are open
// and regressed at each scrape (SPEC section 7): a series a queue, so
// that an alert can fire when a queue has one open, or one comes back.
type groupStateCollector struct{ b *broker.Broker }

func (groupStateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descGroupsOpen
	ch <- descGroupsRegressed
}

func (gc groupStateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	counts, err := gc.b.ErrorGroupCounts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descGroupsOpen, err)
		return
	}
	for _, n := range counts {
		ch <- prometheus.MustNewConstMetric(descGroupsOpen, prometheus.GaugeValue, float64(n.Open), n.Queue)
		ch <- prometheus.MustNewConstMetric(descGroupsRegressed, prometheus.GaugeValue, float64(n.Regressed), n.Queue)
	}
}

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

package web_test

import (
	"net/http"
	"strings"
	"testing"
)

type configured struct {
	Configured bool   `json:"configured"`
	Queue      string `json:"queue"`
	Options    struct {
		LeaseTime          int  `json:"leaseTime"`
		RetryLimit         int  `json:"retryLimit"`
		RetryDelay         int  `json:"retryDelay"`
		DeadLetterQueue    bool `json:"deadLetterQueue"`
		DLQAfterMaxRetries bool `json:"dlqAfterMaxRetries"`
	} `json:"options"`
}

func TestConfigureChangesOnlyNamedOptions(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var c configured
	s.call("POST", "/api/v1/configure", `{"queue":"orders","options":{"retryLimit":5,"deadLetterQueue":false}}`).want(http.StatusOK).decode(&c)
	if !c.Configured || c.Queue != "orders" || c.Options.RetryLimit != 5 || c.Options.DeadLetterQueue ||
		c.Options.LeaseTime != 300 || c.Options.RetryDelay != 1000 || !c.Options.DLQAfterMaxRetries {
		t.Fatalf("first configure: %+v", c)
	}
	s.call("POST", "/api/v1/configure", `{"queue":"orders","options":{"leaseTime":30}}`).want(http.StatusOK).decode(&c)
	if c.Options.LeaseTime != 30 || c.Options.RetryLimit != 5 || c.Options.DeadLetterQueue {
		t.Fatalf("second configure: %+v", c)
	}
	// Without options it creates the queue with the defaults.
	s.call("POST", "/api/v1/configure", `{"queue":"plain"}`).want(http.StatusOK).decode(&c)
	if c.Options.RetryLimit != 3 || c.Options.LeaseTime != 300 {
		t.Fatalf("plain: %+v", c)
	}
}

func TestConfigureRefusesBadInput(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("q", `{"retryLimit":2,"leaseTime":60}`)
	cases := []struct {
		name, body string
		want       []string
	}{
		{"RetryLimitString", `{"queue":"q","options":{"retryLimit":"3"}}`, []string{"retryLimit", "whole number"}},
		{"NegativeLeaseTime", `{"queue":"q","options":{"leaseTime":-1}}`, []string{"leaseTime", "between"}},
		{"ZeroLeaseTime", `{"queue":"q","options":{"leaseTime":0}}`, []string{"leaseTime"}},
		{"FractionalDelay", `{"queue":"q","options":{"retryDelay":1.5}}`, []string{"retryDelay"}},
		{"BoolAsString", `{"queue":"q","options":{"deadLetterQueue":"false"}}`, []string{"deadLetterQueue", "true or false"}},
		{"UnknownOption", `{"queue":"q","options":{"retryLimit":1,"colour":"red"}}`, []string{"unknown option", "colour"}},
		{"OptionsNotObject", `{"queue":"q","options":[1]}`, []string{`"options"`, "object"}},
		{"QueueNotString", `{"queue":7,"options":{}}`, []string{`"queue"`, "string"}},
		{"BadQueueName", `{"queue":"no spaces","options":{}}`, []string{"queue name"}},
		{"MissingQueue", `{"options":{"retryLimit":1}}`, []string{"queue name"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := s.sub(t)
			s.call("POST", "/api/v1/configure", tc.body).wantError(http.StatusBadRequest, tc.want...)
		})
	}
	// Nothing changed.
	var q queueInfo
	s.call("GET", "/api/v1/resources/queues/q", "").want(http.StatusOK).decode(&q)
	if q.Options.RetryLimit != 2 || q.Options.LeaseTime != 60 || q.Options.RetryDelay != 1000 || !q.Options.DeadLetterQueue {
		t.Fatalf("options changed by refused calls: %+v", q.Options)
	}
	s.call("GET", "/api/v1/resources/queues/no%20spaces", "").wantError(http.StatusNotFound)
}

// The circuit breaker's options: defaults (off, a probe every 30 s),
// set, answered, and each bound refused naming the option.
func TestConfigureBreakerOptions(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var c struct {
		Options struct {
			HoldAfterFailures *int `json:"holdAfterFailures"`
			HoldProbeSeconds  *int `json:"holdProbeSeconds"`
		} `json:"options"`
	}
	s.call("POST", "/api/v1/configure", `{"queue":"q"}`).want(http.StatusOK).decode(&c)
	if c.Options.HoldAfterFailures == nil || *c.Options.HoldAfterFailures != 0 || c.Options.HoldProbeSeconds == nil || *c.Options.HoldProbeSeconds != 30 {
		t.Fatalf("defaults: %+v", c.Options)
	}
	s.call("POST", "/api/v1/configure", `{"queue":"q","options":{"holdAfterFailures":20,"holdProbeSeconds":45}}`).want(http.StatusOK).decode(&c)
	if *c.Options.HoldAfterFailures != 20 || *c.Options.HoldProbeSeconds != 45 {
		t.Fatalf("set: %+v", c.Options)
	}
	for _, body := range []string{
		`{"holdAfterFailures":-1}`, `{"holdAfterFailures":1000001}`, `{"holdAfterFailures":"5"}`, `{"holdAfterFailures":2.5}`,
		`{"holdProbeSeconds":0}`, `{"holdProbeSeconds":86401}`, `{"holdProbeSeconds":true}`,
	} {
		name := body[2 : strings.Index(body[2:], `"`)+2]
		s.call("POST", "/api/v1/configure", `{"queue":"q","options":`+body+`}`).wantError(http.StatusBadRequest, "option "+name)
	}
	raw := s.call("GET", "/api/v1/resources/queues/q", "").want(http.StatusOK)
	if !strings.Contains(string(raw.body), `"holdAfterFailures":20,"holdProbeSeconds":45`) {
		t.Fatalf("the queue's options: %s", raw.body)
	}
	s.call("POST", "/api/v1/configure", `{"queue":"q","options":{"holdAfterFailures":1000000,"holdProbeSeconds":null}}`).want(http.StatusOK).decode(&c)
	if *c.Options.HoldAfterFailures != 1000000 || *c.Options.HoldProbeSeconds != 30 {
		t.Fatalf("the bound and a default again: %+v", c.Options)
	}
}

package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/web"
)

// TestHotBodiesTheFastDecoderLeaves: a push and an ack batch that the
// hand-written decoders leave to encoding/json (keys in another case,
// which encoding/json matches) are still taken, through the reflective
// decoder.
func TestHotBodiesTheFastDecoderLeaves(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var pushed []struct {
		Queue string `json:"queue"`
	}
	s.call("POST", "/api/v1/push", `{"Items":[{"QUEUE":"folded","payload":{"a":1}}]}`).want(http.StatusCreated).decode(&pushed)
	if len(pushed) != 1 || pushed[0].Queue != "folded" {
		t.Fatalf("pushed %+v", pushed)
	}
	p := s.pop("folded", "")
	m := p.Messages[0]
	var res []struct {
		Success bool `json:"success"`
	}
	s.call("POST", "/api/v1/ack/batch", `{"Acknowledgments":[{"TransactionId":"`+m.TransactionID+`","partitionId":"`+m.PartitionID+`","leaseId":"`+*p.LeaseID+`","status":"completed"}]}`).
		want(http.StatusOK).decode(&res)
	if len(res) != 1 || !res[0].Success {
		t.Fatalf("acked %+v", res)
	}
}

// TestOversizedBodyAnsweredAsBefore: a chunked body over the cap is
// answered as encoding/json's decoder answered it when it read the body
// itself: a syntax error before the cap is a 400 naming its byte, a body
// valid up to the cap a 413.
func TestOversizedBodyAnsweredAsBefore(t *testing.T) {
	t.Parallel()
	s := setup(t, func(c *web.Config) { c.MaxBodyBytes = 1024 })
	pad := strings.Repeat("x", 4000)
	s.requestChunked("/api/v1/push", `{"items":[x`+pad, http.Header{}).
		wantError(http.StatusBadRequest, "malformed JSON at byte 11: invalid character 'x' looking for beginning of value")
	s.requestChunked("/api/v1/push", `{"items":[{"queue":"q","payload":"`+pad+`"}]}`, http.Header{}).
		wantError(http.StatusRequestEntityTooLarge, "request body is larger than 1024 bytes")
	s.requestChunked("/api/v1/ack/batch", `{"acknowledgments":[{"transactionId":"`+pad+`"}]}`, http.Header{}).
		wantError(http.StatusRequestEntityTooLarge, "request body is larger than 1024 bytes")
}

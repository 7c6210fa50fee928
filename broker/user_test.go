package broker_test

import (
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

func TestRoles(t *testing.T) {
	t.Parallel()
	cases := []struct {
		have, need broker.Role
		ok         bool
	}{
		{broker.RoleViewer, broker.RoleViewer, true},
		{broker.RoleViewer, broker.RoleOperator, false},
		{broker.RoleOperator, broker.RoleOperator, true},
		{broker.RoleOperator, broker.RoleAdmin, false},
		{broker.RoleAdmin, broker.RoleOperator, true},
		{broker.Role(""), broker.RoleViewer, false},
		{broker.Role("root"), broker.RoleViewer, false},
	}
	for _, c := range cases {
		if got := c.have.Allows(c.need); got != c.ok {
			t.Errorf("%q allows %q: %v, want %v", c.have, c.need, got, c.ok)
		}
	}
}

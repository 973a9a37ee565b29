package controller

import "testing"

func TestRevoke(t *testing.T) {
	if err := New(Options{}).Revoke(t.Context(), nil, false); err != nil {
		t.Fatal(err)
	}
}

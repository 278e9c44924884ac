package main

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestOpsFlagsAnywhere(t *testing.T) {
	c, pos, err := newOps("snapshot", []string{"save", "--addr", "10.0.0.1:9000", "f.snap", "--json", "--timeout=3s"}, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pos, []string{"save", "f.snap"}) || c.base != "http://10.0.0.1:9000" || !c.json || c.client.Timeout != 3*time.Second {
		t.Fatalf("pos %v base %s json %v timeout %v", pos, c.base, c.json, c.client.Timeout)
	}
	c, _, err = newOps("status", []string{"--addr", "https://n1.example:8761/"}, time.Second, nil)
	if err != nil || c.base != "https://n1.example:8761" {
		t.Fatalf("base %q, %v", c.base, err)
	}
	if _, _, err := newOps("status", []string{"--nope"}, time.Second, nil); !errors.Is(err, errUsage) {
		t.Fatalf("unknown flag: %v, want a usage error", err)
	}
}

func TestFallbackText(t *testing.T) {
	for raw, want := range map[string]string{
		"":                  "",
		"null":              "",
		"true":              ", AP fallback ACTIVE",
		"false":             ", fallback off",
		`{"active": true}`:  ", AP fallback ACTIVE",
		`{"active": false}`: ", fallback off",
	} {
		if got := fallbackText(json.RawMessage(raw)); got != want {
			t.Errorf("fallbackText(%q) = %q, want %q", raw, got, want)
		}
	}
}

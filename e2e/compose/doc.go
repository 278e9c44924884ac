// Package compose holds the container system tests: the repository's
// docker-compose.yml run in Docker (docker-compose 1.29 or docker compose
// v2) with the image `make image` builds, under crashes, partitions,
// restarts and pauses, against a container of the same image on the
// compose network that is not a member (intruder_test.go), and as two
// regions, east copying west (regions_test.go, the regions profile).
// Every test uses its own compose project name and its own fixed host ports
// in 21700–21899 (below the ephemeral range, and below the range random test
// ports come from, so a test of another package running at the same time
// cannot hold one), and takes its project down with its volumes at the end.
// Without a usable Docker engine the tests skip, and fail under
// HEUREKA_REQUIRE_TOOLS=1 (make test). The soak (soak_test.go, build tag
// soak) runs the same faults at random for ten minutes.
//
// It imports no heureka package; its tests import e2e and opapi.
package compose

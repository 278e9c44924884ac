//go:build chaos

package e2e

import "time"

// The chaos build churns the regions of TestSpringRemoteRegions for 5
// minutes (HEUREKA_REGIONS_CHURN still overrides it).
func init() { regionsChurnDefault = 5 * time.Minute }

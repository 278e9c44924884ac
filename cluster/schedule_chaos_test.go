//go:build chaos

// The long run of the fault schedules (schedule_test.go):
//
//	go test -tags chaos ./cluster -run 'TestSchedule$' -schedules 2000 -timeout 0 -v
package cluster_test

func init() {
	defaultSchedules = 2000
	clockSeeds = true
}

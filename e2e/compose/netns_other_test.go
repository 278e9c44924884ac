//go:build !linux

package compose

import (
	"context"
	"errors"
	"net"
)

func dialInNetns(context.Context, int, string) (net.Conn, error) {
	return nil, errors.New("reaching a disconnected container needs Linux network namespaces")
}

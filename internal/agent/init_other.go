//go:build !linux

package agent

import "context"

func asInit(context.Context) {}
func isInit() bool           { return false }

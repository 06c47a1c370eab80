// Package freeport finds free TCP ports for servers that bind them later (the embedded
// Temporal server's services, bench/cluster's processes).
//
// A port the kernel picks for ":0" comes from the ephemeral range, which it also hands to
// every outgoing connection: between finding such a port free and the server binding it, a
// busy machine can give it to a connection, and Temporal's services do not survive a port
// they cannot bind. So Take searches below the ephemeral range (Linux starts it at 32768),
// from a random point, and never hands out one port twice in a process.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// The range Take searches: below the ephemeral ports and above most well-known services.
const (
	Low  = 20000
	High = 32000
)

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Take returns n distinct ports on ip that were free a moment ago.
func Take(ip string, n int) ([]int, error) {
	mu.Lock()
	defer mu.Unlock()
	ports := make([]int, 0, n)
	start := rand.IntN(High - Low)
	for i := 0; i < High-Low && len(ports) < n; i++ {
		p := Low + (start+i)%(High-Low)
		if given[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		_ = l.Close()
		given[p] = true
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("freeport: found only %d of %d free ports on %s in [%d, %d)", len(ports), n, ip, Low, High)
	}
	return ports, nil
}

package sample

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"flowweight/internal/fraction"
)

// NIC samples an interface's throughput as a fraction of its line rate: the busier direction
// (receive or transmit, since links are full duplex) over the period, from the byte counters in
// /sys/class/net/NAME/statistics.
type NIC struct {
	Name string
	// SpeedMbps is the line rate in Mbit/s; 0 reads /sys/class/net/NAME/speed on each sample
	// (virtual interfaces often report -1 there: set the speed in the config).
	SpeedMbps int
	Read      ReadFileFunc // default os.ReadFile
	Now       Clock        // default time.Now

	prevRx, prevTx uint64
	prevTime       time.Time
	hasPrev        bool
}

// Provides implements Provider.
func (n *NIC) Provides() Field { return FieldNetUtil }

// Sample implements Sampler.
func (n *NIC) Sample(ctx context.Context) (Values, error) {
	read, now := orRead(n.Read), orClock(n.Now)
	dir := path.Join("/sys/class/net", n.Name)
	speed := n.SpeedMbps
	if speed <= 0 {
		data, err := read(path.Join(dir, "speed"))
		if err != nil {
			return Values{}, fmt.Errorf("nic %s speed: %w", n.Name, err)
		}
		s, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || s <= 0 {
			return Values{}, fmt.Errorf("nic %s: speed %q unknown, set nic_speed_mbps", n.Name, truncate(strings.TrimSpace(string(data))))
		}
		speed = s
	}
	var ctr [2]uint64
	for i, f := range []string{"rx_bytes", "tx_bytes"} {
		file := path.Join(dir, "statistics", f)
		data, err := read(file)
		if err != nil {
			return Values{}, fmt.Errorf("nic %s: %w", n.Name, err)
		}
		if ctr[i], err = ParseUint(data); err != nil {
			return Values{}, fmt.Errorf("%s: %w", file, err)
		}
	}
	t := now()
	prevRx, prevTx, prevTime, had := n.prevRx, n.prevTx, n.prevTime, n.hasPrev
	n.prevRx, n.prevTx, n.prevTime, n.hasPrev = ctr[0], ctr[1], t, true
	if !had {
		return Values{}, fmt.Errorf("nic %s: %w", n.Name, ErrFirstSample)
	}
	u, ok := NetUtil(ctr[0]-prevRx, ctr[1]-prevTx, t.Sub(prevTime), speed)
	if !ok || ctr[0] < prevRx || ctr[1] < prevTx {
		return Values{}, errors.New("nic " + n.Name + ": counters went backwards or no time passed")
	}
	return Values{Known: FieldNetUtil, NetUtil: u}, nil
}

// NetUtil is the busier direction's bit rate over the line rate, clamped to [0,1].
func NetUtil(rxBytes, txBytes uint64, elapsed time.Duration, speedMbps int) (float64, bool) {
	if elapsed <= 0 || speedMbps <= 0 {
		return 0, false
	}
	bits := float64(max(rxBytes, txBytes)) * 8
	return fraction.Clamp(bits / (elapsed.Seconds() * float64(speedMbps) * 1e6)), true
}

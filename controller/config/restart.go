package config

import (
	"errors"
	"fmt"
	"reflect"
)

// RestartNeeded says which changes from running to next a reload cannot apply (listen
// addresses, turning OpenFlow TLS on or off, the [ha] section), each naming its key; nil when
// a reload can apply next. The running controller refuses such a reload whole, and `controller
// rollback` refuses such a version before it writes anything.
func RestartNeeded(running, next *Config) error {
	var errs []error
	if next.Controller.Listen != running.Controller.Listen {
		errs = append(errs, fmt.Errorf("controller.listen: changing %q to %q needs a restart", running.Controller.Listen, next.Controller.Listen))
	}
	if next.Collector.PushListen != running.Collector.PushListen {
		errs = append(errs, fmt.Errorf("collector.push_listen: changing %q to %q needs a restart", running.Collector.PushListen, next.Collector.PushListen))
	}
	if (next.Controller.TLSCert == "") != (running.Controller.TLSCert == "") {
		errs = append(errs, errors.New("controller.tls_cert: turning OpenFlow TLS on or off needs a restart (renewed files at the same or other paths are picked up by a reload)"))
	}
	if next.API.Listen != running.API.Listen {
		errs = append(errs, fmt.Errorf("api.listen: changing %q to %q needs a restart", running.API.Listen, next.API.Listen))
	}
	if !reflect.DeepEqual(next.HA, running.HA) {
		errs = append(errs, errors.New("ha: changing the [ha] section (etcd endpoints, name, prefix, lease, TLS) needs a restart"))
	}
	return errors.Join(errs...)
}

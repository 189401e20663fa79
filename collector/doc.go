// Package collector keeps one state per backend: smoothed metrics, health, warm-up, drain
// and staleness, fed by probe reports (collector/push), SNMP polls (collector/snmp) and the
// collector's own HTTP checks. A Snapshot gives the weights package an immutable view.
//
// Time comes from outside (Config.Now) so the state machine is tested without sleeping.
// It must not compute weights or talk OpenFlow.
package collector

module flowweight

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/google/gopacket v1.1.19 // indirect
	github.com/gosnmp/gosnmp v1.47.0 // indirect
	github.com/netrack/openflow v0.1.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/shirou/gopsutil/v4 v4.26.10 // indirect
)

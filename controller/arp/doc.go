// Package arp builds and parses the ARP frames the controller needs: answering requests
// for virtual IPs (which live on no host, so only the controller can answer) and resolving
// backends' MAC addresses. It is pure: frames in, frames out, built with gopacket's layers
// (never pcap). It must not import the OpenFlow session (controller/ofswitch) nor log;
// the caller moves frames through packet-in and packet-out.
package arp

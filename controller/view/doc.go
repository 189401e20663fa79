// Package view is the controller's read side: what the API, the dashboard, `controller
// status` and the scrape-time metrics collectors show of the running controller.
//
// The balancer's update loop publishes an immutable Snapshot on a Board after every update
// (and the registry of switches when one connects or disconnects); readers read that, the
// collector pool and the syncers' own published statuses, and the event Log and weight
// History, which have locks of their own. No reader takes the balancer's lock or holds a
// pointer to it: a slow scrape or a busy dashboard cannot delay an update, and an update
// cannot hand a reader a half-written service.
//
// It must not import controller/balancer or controller/api (internal/layers checks); the
// balancer and the API import it.
package view

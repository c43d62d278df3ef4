package store

// eventDeliveryStatus is the event list's delivery_status filter: the event
// has a delivery in that status. It is a residual of the walk of the
// events' index (listQuery), each event checked by deliveries_event_idx; a
// delivery is made with its event (same created_at), so bounding its
// created_at by the event's lets the probe skip the older day partitions.
// A rare status (failed) among many events gives short pages with a resume
// cursor rather than a read of the merchant's whole retention; %s is the
// status condition (storedStatus), whose columns resolve to d's; an index of
// deliveries by their event's order would serve it in one walk, at the cost
// of one more index entry written for every delivery on the hot path.
const eventDeliveryStatus = `EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id
	AND d.merchant_id = events.merchant_id AND d.created_at >= events.created_at AND %s)`

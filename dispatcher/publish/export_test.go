package publish

// KeepsMerchants reports whether p keeps merchants between publishes: it
// hears the announcements of changes.
func (p *Publisher) KeepsMerchants() bool {
	p.merchantsKept.mu.Lock()
	defer p.merchantsKept.mu.Unlock()
	return p.merchantsKept.live
}

// MerchantsEmptied counts the times p's kept merchants were dropped.
func (p *Publisher) MerchantsEmptied() uint64 {
	p.merchantsKept.mu.Lock()
	defer p.merchantsKept.mu.Unlock()
	return p.merchantsKept.generation
}

// MerchantCacheTTL is how long a kept merchant serves at most.
const MerchantCacheTTL = merchantCacheTTL

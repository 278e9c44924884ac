package httpapi

import (
	"github.com/gin-gonic/gin"

	"github.com/heureka-registry/heureka/cache"
	"github.com/heureka-registry/heureka/eureka"
)

// The format a Eureka read answers in, from its Accept and
// X-Eureka-Accept headers.

// responseFormat is the format a read answers in: Accept picks JSON or
// XML; X-Eureka-Accept: compact picks the compact variant for the documents
// eureka-server serves compact (applications, delta, one application).
func responseFormat(c *gin.Context, ent cache.Entity) eureka.Format {
	f := eureka.ResponseFormat(c.GetHeader("Accept"))
	switch ent {
	case cache.EntityApps, cache.EntityDelta, cache.EntityApp:
		return f.WithAccept(c.GetHeader("X-Eureka-Accept"))
	}
	return f
}

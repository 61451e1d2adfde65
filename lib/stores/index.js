'use strict'
/**
 * The stores this package ships, by the names it exports them under
 * (index.js spreads this list into its exports).
 */

module.exports = {
  ...require('./memory.js'),
  ...require('./redis.js'),
  ...require('./postgres.js'),
  ...require('./mysql.js'),
  ...require('./sqlite.js'),
  ...require('./etcd.js'),
}

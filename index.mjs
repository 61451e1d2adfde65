// ESM entry: the same module instance as `require("@shaferllc/keel/core")`, so a
// program that mixes import and require shares one default store. Node finds
// the names index.js exports (its stores included) as it loads it.
export * from './index.js'

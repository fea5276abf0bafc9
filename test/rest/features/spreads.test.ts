// Spread embeddings (PostgREST 13+): `...rel(cols)` lifts a to-one relation's columns into
// the parent and spreads a to-many (one-to-many, many-to-many) relation as one array per
// column, with nested spreads and embeds inside, scoped filters and orders (related orders
// too), !inner and not.is.null, and aggregates hoisted out of to-one spreads. Real
// Postgres through the engine.
import t from 'tap'
import { createRestFixture } from '../../helpers/rest-fixture.js'

t.test('spread embeddings', async (t) => {
  const fx = await createRestFixture(t, { shared: 'rest', rest: { aggregates_enabled: true } })
  const get = async (path: string): Promise<unknown> => {
    const r = await fx.get(path)
    t.equal(r.status, 200, path)
    return r.json()
  }

  t.test('to-one: columns lifted into the parent, nested to-one spreads too', async (t) => {
    t.same(
      await get('/books?select=title,...authors(author:name,...author_profiles(website))&id=in.(1,4,6)&order=id'),
      [
        { title: 'A Wizard of Earthsea', author: 'Ursula Le Guin', website: 'https://ursula.example' },
        { title: 'Solaris', author: 'Stanislaw Lem', website: 'https://lem.example' },
        { title: 'Kindred', author: 'Octavia Butler', website: null },
      ],
    )
  })

  t.test('to-many: one array per column, [] when nothing, [null] for a null value', async (t) => {
    t.same(await get('/authors?select=name,...books(title,price)&books.order=id&order=id&id=in.(2,4)'), [
      { name: 'Stanislaw Lem', title: ['Solaris', 'The Cyberiad'], price: [8.75, null] },
      { name: 'Nobody', title: [], price: [] },
    ])
    t.same(
      await get('/tags?select=name,...books(id)&books.order=id.desc&order=id'),
      [
        { name: 'classic', id: [4, 2, 1] },
        { name: 'award', id: [6, 2] },
        { name: 'unused', id: [] },
      ],
      'many-to-many',
    )
  })

  t.test('inside a to-many spread: nested spreads and embeds become arrays', async (t) => {
    t.same(await get('/tags?select=name,...books(title,...authors(author:name))&books.order=id&id=eq.1'), [
      {
        name: 'classic',
        title: ['A Wizard of Earthsea', 'The Left Hand of Darkness', 'Solaris'],
        author: ['Ursula Le Guin', 'Ursula Le Guin', 'Stanislaw Lem'],
      },
    ])
    t.same(await get('/tags?select=name,...books(authors(name))&books.order=id&id=eq.2'), [
      { name: 'award', authors: [{ name: 'Ursula Le Guin' }, { name: 'Octavia Butler' }] },
    ])
    t.same(await get('/authors?select=name,...books(tags(name))&books.order=id&id=eq.3'), [
      { name: 'Octavia Butler', tags: [[{ name: 'award' }]] },
    ])
  })

  t.test('orders: columns not selected, and related orders through a to-one child', async (t) => {
    t.same(await get('/authors?select=name,...books(title)&books.order=year.desc&id=eq.1'), [
      { name: 'Ursula Le Guin', title: ['The Dispossessed', 'The Left Hand of Darkness', 'A Wizard of Earthsea'] },
    ])
    t.same(
      await get('/tags?select=name,...books(id,...authors(country))&books.order=authors(country).asc,id.desc&id=eq.1'),
      [{ name: 'classic', id: [4, 2, 1], country: ['PL', 'US', 'US'] }],
    )
  })

  t.test('filters, !inner and not.is.null', async (t) => {
    t.same(await get('/authors?select=name,...books(title)&books.year=gt.1970&order=id'), [
      { name: 'Ursula Le Guin', title: ['The Dispossessed'] },
      { name: 'Stanislaw Lem', title: [] },
      { name: 'Octavia Butler', title: ['Kindred'] },
      { name: 'Nobody', title: [] },
    ])
    t.same(await get('/authors?select=name,...books!inner(year)&books.year=gt.1970&order=id'), [
      { name: 'Ursula Le Guin', year: [1974] },
      { name: 'Octavia Butler', year: [1979] },
    ])
    t.same(await get('/authors?select=id,...books(year)&books.year=lt.1962&books=not.is.null'), [
      { id: 2, year: [1961] },
    ])
  })

  t.test('aggregates: hoisted out of to-one spreads, not implemented in to-many ones', async (t) => {
    t.same(await get('/books?select=...authors(country),count()&author_id=not.is.null&order=authors(country)'), [
      { country: 'PL', count: 2 },
      { country: 'US', count: 4 },
    ])
    t.same(
      await get('/tags?select=name,book_tags(...books(year.max()))&order=id'),
      [
        { name: 'classic', book_tags: [{ max: 1969 }] },
        { name: 'award', book_tags: [{ max: 1979 }] },
        { name: 'unused', book_tags: [{ max: null }] },
      ],
      'hoisted into the embed that holds the spread, aggregated there',
    )
    const r = await fx.get('/authors?select=name,...books(price.sum())')
    t.equal(r.status, 400)
    t.same(r.json(), {
      code: 'PGRST127',
      message: 'Feature not implemented',
      details: 'Aggregates are not implemented for one-to-many or many-to-many spreads.',
      hint: null,
    })
  })
})
